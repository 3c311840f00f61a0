package hubmanager

import (
	"flag"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestZeroOptionsAreTheFlagDefaults: a hub built from Options{} behaves as the binary run
// without flags, so that tests and embedders need not remember any default.
func TestZeroOptionsAreTheFlagDefaults(t *testing.T) {
	fromFlags := Options{}
	fs := flag.NewFlagSet("hub", flag.ContinueOnError)
	fromFlags.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Options{}.complete(), fromFlags.complete()); diff != "" {
		t.Errorf("flag defaults differ from the zero Options' defaults (-zero +flags):\n%s", diff)
	}
	if got := fromFlags.complete(); !*got.InstallCRDs || got.MetricsBindAddress != ":8080" || got.MemberQPS != 50 {
		t.Errorf("defaults changed: InstallCRDs %v, metrics %q, member QPS %v", *got.InstallCRDs, got.MetricsBindAddress, got.MemberQPS)
	}
}

// TestFlagsSetOptions: every flag lands in its field.
func TestFlagsSetOptions(t *testing.T) {
	var opts Options
	fs := flag.NewFlagSet("hub", flag.ContinueOnError)
	opts.BindFlags(fs)
	err := fs.Parse([]string{"--secret-namespace=ns", "--secret-label=l", "--secret-key=k", "--resync-period=1m",
		"--probe-interval=2s", "--member-qps=7.5", "--member-burst=9", "--install-crds=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=:9", "--leader-elect",
		"--credentials-expiry-warning=48h", "--heartbeat-interval=3s"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{SecretNamespace: "ns", SecretLabel: "l", SecretKey: "k", ResyncPeriod: 60e9, ProbeInterval: 2e9,
		MemberQPS: 7.5, MemberBurst: 9, InstallCRDs: ptr.To(false), MetricsBindAddress: "0", HealthProbeBindAddress: ":9", LeaderElect: true,
		CredentialsExpiryWarning: 48 * time.Hour, HeartbeatInterval: 3 * time.Second}
	if diff := cmp.Diff(want, opts); diff != "" {
		t.Errorf("options from flags (-want +got):\n%s", diff)
	}
	if err := fs.Parse([]string{"--member-qps=x"}); err == nil {
		t.Errorf("--member-qps=x was accepted")
	}
}
