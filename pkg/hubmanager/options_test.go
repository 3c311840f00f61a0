package hubmanager

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"
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
	if got := fromFlags.complete(); !*got.InstallCRDs || got.MetricsBindAddress != ":8443" || got.MemberQPS != 50 {
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
		"--credentials-expiry-warning=48h", "--heartbeat-interval=3s", "--sharded", "--replica-id=r-1", "--lease-duration=9s"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{SecretNamespace: "ns", SecretLabel: "l", SecretKey: "k", ResyncPeriod: 60e9, ProbeInterval: 2e9,
		MemberQPS: 7.5, MemberBurst: 9, InstallCRDs: ptr.To(false), MetricsBindAddress: "0", HealthProbeBindAddress: ":9", LeaderElect: true,
		CredentialsExpiryWarning: 48 * time.Hour, HeartbeatInterval: 3 * time.Second, Sharded: true, ReplicaID: "r-1", LeaseDuration: 9 * time.Second}
	if diff := cmp.Diff(want, opts); diff != "" {
		t.Errorf("options from flags (-want +got):\n%s", diff)
	}
	if err := fs.Parse([]string{"--member-qps=x"}); err == nil {
		t.Errorf("--member-qps=x was accepted")
	}
}

// TestValidate: options that cannot work are refused with an error naming the flags.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string // a substring of the error; empty: valid
	}{
		{name: "defaults", opts: Options{}},
		{name: "sharded", opts: Options{Sharded: true, ReplicaID: "hub-7d9f8-x2x4z"}},
		{name: "leader election", opts: Options{LeaderElect: true}},
		{name: "both", opts: Options{Sharded: true, LeaderElect: true}, want: "--sharded and --leader-elect are mutually exclusive"},
		{name: "short lease", opts: Options{LeaseDuration: 2 * time.Second}, want: "--lease-duration 2s is too short"},
		{name: "upper-case id", opts: Options{ReplicaID: "Hub-1"}, want: `--replica-id "Hub-1" cannot name a Lease`},
		{name: "id with an underscore", opts: Options{ReplicaID: "hub_1"}, want: "cannot name a Lease"},
		{name: "id too long", opts: Options{ReplicaID: strings.Repeat("a", 240)}, want: "at most 231 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestReplicaIDDefaultsToThePodName: --replica-id defaults to $POD_NAME (the downward API in
// config/default), else the hostname.
func TestReplicaIDDefaultsToThePodName(t *testing.T) {
	t.Setenv("POD_NAME", "configbundle-hub-7d9f8-x2x4z")
	if got := (Options{}).complete().ReplicaID; got != "configbundle-hub-7d9f8-x2x4z" {
		t.Errorf("replica id %q, want the pod name", got)
	}
	t.Setenv("POD_NAME", "")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if got := (Options{}).complete().ReplicaID; got != sanitize.DNS1123(host) || got == "" {
		t.Errorf("replica id %q, want the hostname %q", got, sanitize.DNS1123(host))
	}
}
