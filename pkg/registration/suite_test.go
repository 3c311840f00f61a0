package registration_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/suite"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	// startTimeout bounds the start of both control planes and the CRD installation.
	startTimeout = 3 * time.Minute
	// requestTimeout bounds one Register or Unregister call, or one round of requests.
	requestTimeout = time.Minute
	// timeout bounds an Eventually: a CRD going away or becoming established, a revoked token
	// being refused (the API server caches successful token authentications for 10 seconds).
	timeout = 30 * time.Second
	// interval is the polling interval of Eventually.
	interval = 100 * time.Millisecond
	// unreachableTimeout is the context timeout of calls against an unreachable member; they
	// must fail well within it.
	unreachableTimeout = 10 * time.Second
	// verifyGiveUp is the context timeout under which the credential check must give up on a
	// credential that the member keeps refusing.
	verifyGiveUp = 3 * time.Second
	// watchTimeout bounds the watches the least-privilege test opens.
	watchTimeout = 2 * time.Second
)

// The suite runs one hub and one member, each a real control plane; the hub serves the hub API
// (MemberCluster), the member the ConfigBundle CRD. No hub process runs. The tests that register
// share them and run one after the other: every registration of the member shares the ClusterRole.
var (
	scheme = runtime.NewScheme()

	hubCP, memberCP *controlplane.ControlPlane
	// hubAdmin and memberAdmin are system:masters clients.
	hubAdmin, memberAdmin client.WithWatch
	// memberURL is the member's API server URL.
	memberURL string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, configbundlev1alpha1.AddToScheme, hubv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	hubCRDs, err := config.HubCRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the hub CRDs: %v\n", err)
		return 1
	}
	return suite.Run(m, suite.Options{
		StartTimeout: startTimeout,
		Planes: []controlplane.Plane{
			{Name: "hub", Options: controlplane.Options{StartTimeout: startTimeout, CRDs: hubCRDs}},
			{Name: "member", Options: controlplane.Options{StartTimeout: startTimeout}},
		},
		Setup: setUp,
	})
}

// setUp installs the ConfigBundle CRD in the member and builds the admin clients.
func setUp(_, _ context.Context, cps []*controlplane.ControlPlane) error {
	hubCP, memberCP = cps[0], cps[1]
	crds, err := config.MemberCRDs()
	if err == nil {
		_, err = envtest.InstallCRDs(memberCP.Config, envtest.CRDInstallOptions{CRDs: crds})
	}
	if err != nil {
		return fmt.Errorf("installing the ConfigBundle CRD in the member: %w", err)
	}
	if hubAdmin, err = client.NewWithWatch(hubCP.Config, client.Options{Scheme: scheme}); err == nil {
		memberAdmin, err = client.NewWithWatch(memberCP.Config, client.Options{Scheme: scheme})
	}
	if err != nil {
		return fmt.Errorf("building clients: %w", err)
	}
	u, _, err := rest.DefaultServerUrlFor(memberCP.Config)
	if err != nil {
		return fmt.Errorf("member URL: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	memberURL = u.String()
	return nil
}
