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
// (MemberCluster), the member the ConfigBundle CRD. No hub process runs. The tests share them and
// run one after the other: every registration of the member shares the ClusterRole.
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
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: these tests need real control planes; "+
			"run them with `make test` (which builds etcd and kube-apiserver and sets KUBEBUILDER_ASSETS), "+
			"or set KUBEBUILDER_ASSETS to the directory that `bash hack/testbin.sh` prints")
		return 1
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, configbundlev1alpha1.AddToScheme, hubv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	began := time.Now()
	hubCRDs, err := config.HubCRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the hub CRDs: %v\n", err)
		return 1
	}
	cps, err := controlplane.Start(ctx,
		controlplane.Plane{Name: "hub", Options: controlplane.Options{StartTimeout: startTimeout, CRDs: hubCRDs}},
		controlplane.Plane{Name: "member", Options: controlplane.Options{StartTimeout: startTimeout}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control planes: %v\n", err)
		return 1
	}
	defer func() {
		if err := controlplane.StopAll(cps); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the control planes: %v\n", err)
		}
	}()
	hubCP, memberCP = cps[0], cps[1]

	crds, err := config.MemberCRDs()
	if err == nil {
		_, err = envtest.InstallCRDs(memberCP.Config, envtest.CRDInstallOptions{CRDs: crds})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "installing the ConfigBundle CRD in the member: %v\n", err)
		return 1
	}
	if hubAdmin, err = client.NewWithWatch(hubCP.Config, client.Options{Scheme: scheme}); err == nil {
		memberAdmin, err = client.NewWithWatch(memberCP.Config, client.Options{Scheme: scheme})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "building clients: %v\n", err)
		return 1
	}
	u, _, err := rest.DefaultServerUrlFor(memberCP.Config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "member URL: %v\n", err)
		return 1
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	memberURL = u.String()
	fmt.Fprintf(os.Stderr, "started hub and member control planes in %s\n", time.Since(began).Round(time.Millisecond))
	return m.Run()
}
