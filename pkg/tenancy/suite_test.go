package tenancy_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/suite"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/tenancy"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	// timeout bounds an Eventually: a status written.
	timeout = 30 * time.Second
	// interval is the polling interval of Eventually.
	interval = 50 * time.Millisecond
)

// The suite runs one hub, a real control plane, and on it a manager with the ClusterSet and
// ClusterSetBinding status controllers alone, not sharded. No member cluster runs: the tests
// create the MemberClusters the sets count.
var hub client.Client

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	planes, err := suite.HubAndMembers()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return suite.Run(m, suite.Options{Planes: planes, Setup: setUp})
}

// setUp starts the hub's manager with the tenancy controllers.
func setUp(ctx, _ context.Context, cps []*controlplane.ControlPlane) error {
	scheme, err := hubmanager.Scheme()
	if err != nil {
		return err
	}
	if hub, err = client.New(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	h, err := suite.NewHub(ctx, cps, scheme, nil)
	if err != nil {
		return err
	}
	if err := tenancy.SetupWithManager(h.Manager.GetLocalManager(), sharding.Replica{}); err != nil {
		return err
	}
	h.Start(ctx)
	return nil
}

// createMember creates the MemberCluster of a member, deleted when the test ends.
func createMember(t *testing.T, name string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	mc := &hubv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: name}},
	}
	g.Expect(hub.Create(ctx, mc)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(hub.Delete(ctx, mc))).To(Succeed()) })
}

// haveCondition matches conditions holding one of type t with status and reason.
var haveCondition = suite.HaveCondition
