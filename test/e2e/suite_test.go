package e2e

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	startTimeout  = 3 * time.Minute
	joinTimeout   = time.Minute // connect, install the CRD, warm the caches
	timeout       = 20 * time.Second
	interval      = 100 * time.Millisecond
	quietPeriod   = 3 * time.Second
	probeInterval = time.Second
	// heartbeatInterval is the hub's --heartbeat-interval in the suite.
	heartbeatInterval = time.Second
	secretNS          = hubv1alpha1.DefaultSecretNamespace
)

// hubArgs are the flags of every hub process of the suite.
var hubArgs = []string{"--probe-interval=" + probeInterval.String(), "--heartbeat-interval=" + heartbeatInterval.String()}

// fl is the fleet: a hub and five members. m1 to m3 are registered with the registration
// command; m4 is never registered: a cluster without the hub's CRDs;
// quietMember (and the hub) log every write they serve, for TestSteadyStateIsSilent. The hub
// process is fleet.HubName.
var fl *fleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if err := controlplane.CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var err error
	fl, err = fleet.Start(ctx, fleet.Options{
		Hub: controlplane.Options{AuditWrites: true},
		Members: append(controlplane.Named(controlplane.Options{}, "m1", "m2", "m3", "m4"),
			controlplane.Named(controlplane.Options{AuditWrites: true}, quietMember)...),
		HubArgs: hubArgs,
		Keep:    os.Getenv("E2E_KEEP") != "",
		Timeout: timeout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = fl.Close() }()
	if err := startHub(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer fl.StopHub(fleet.HubName, syscall.SIGTERM)
	code := m.Run()
	if p := fl.HubProcess(fleet.HubName); code != 0 && p != nil {
		fmt.Fprintf(os.Stderr, "---- hub log (tail of %s) ----\n%s\n", p.LogPath, p.LogTail(20000))
	}
	return code
}

// startHub starts the hub process under test (again, after a test stopped it), and waits until
// it reports every member: a test that follows then never reads a MemberCluster's Ready left
// by the hub that stopped.
func startHub() error {
	ctx := context.Background()
	if _, err := fl.StartHub(ctx, fleet.HubName); err != nil {
		return err
	}
	return fl.WaitReported(ctx, fleet.HubName)
}
