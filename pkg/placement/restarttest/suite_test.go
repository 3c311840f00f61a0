package restarttest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/kwok"
	"configbundle.dev/hub/internal/testing/suite"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/placement"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// The suite runs one hub and two members, each member a real control plane whose
// kube-controller-manager runs the deployment and replicaset controllers and whose Pods kwok
// runs on one simulated Node; on the hub, a manager with placement and the ConfigBundle
// reconciler, as in package placement's suite.
const (
	canary = "member-a"
	rest   = "member-b"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	timeout  = 90 * time.Second
	interval = 100 * time.Millisecond
)

var (
	hub           client.Client
	memberClients map[string]client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	scheme, err := hubmanager.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	planes, err := suite.HubAndMembers(canary, rest)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := range planes[1:] {
		planes[i+1].GarbageCollector = true
		planes[i+1].Controllers = []string{"deployment", "replicaset", "serviceaccount"}
	}
	return suite.Run(m, suite.Options{Planes: planes, Setup: func(ctx, startCtx context.Context, cps []*controlplane.ControlPlane) error {
		return setUp(ctx, startCtx, cps, scheme)
	}})
}

// setUp starts kwok in each member, engages the members, creates their MemberClusters and
// starts the hub's manager.
func setUp(ctx, startCtx context.Context, cps []*controlplane.ControlPlane, scheme *runtime.Scheme) error {
	var err error
	if hub, err = client.New(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	h, err := suite.NewHub(ctx, cps, scheme, configbundle.ConfigureCache)
	if err != nil {
		return err
	}
	memberClients = h.Clients
	members := suite.NewMembers(h.Provider)
	if err := hub.Create(startCtx, fleet.NewClusterSet(fleet.GlobalClusterSet, nil)); err != nil {
		return fmt.Errorf("creating ClusterSet %s: %w", fleet.GlobalClusterSet, err)
	}
	for _, cp := range cps[1:] {
		if err := kwok.Start(ctx, cp, memberClients[cp.Name]); err != nil {
			return err
		}
		members.Set(cp.Name, spokeprovider.State{Ready: true, Reason: hubv1alpha1.ConnectedReason, Message: "Connected"})
		mc := &hubv1alpha1.MemberCluster{
			ObjectMeta: metav1.ObjectMeta{Name: cp.Name},
			Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: cp.Name}},
		}
		if err := hub.Create(startCtx, mc); err != nil {
			return fmt.Errorf("creating MemberCluster %s: %w", cp.Name, err)
		}
	}
	if _, err := configbundle.SetupWithManager(h.Manager, configbundle.Options{
		RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second, Connected: members.Connected, ResyncOn: members.OnReady,
	}); err != nil {
		return err
	}
	if err := placement.SetupWithManager(h.Manager, members, placement.Options{
		NotConnectedRetry: 300 * time.Millisecond, NamespaceMissingRetry: 300 * time.Millisecond,
		RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second,
	}); err != nil {
		return err
	}
	if err := h.Manager.Add(members); err != nil {
		return err
	}
	h.Start(ctx)
	return members.WaitEngaged(startCtx, canary, rest)
}
