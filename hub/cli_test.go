package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// bareHubTimeout bounds how long hub without arguments may take to return: it reads nothing.
const bareHubTimeout = 10 * time.Second

// run runs hub with args and returns its exit code, stdout and stderr. KUBECONFIG names a file
// that does not exist, so that a hub started by mistake fails at once instead of connecting
// anywhere.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	var out, errOut bytes.Buffer
	code = execute(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelpGoesToStdoutAndExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"-help"}, {"help"},
		{"register", "--help"}, {"register", "NAME", "--help"}, {"help", "register"},
		{"unregister", "-h"}, {"help", "unregister"}, {"version", "--help"}, {"run", "--help"}, {"help", "run"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage:") || stderr != "" {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 0 and the help on stdout", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	_, stdout, _ := run(t, "register", "--help")
	for _, flag := range []string{"--member-context", "--hub-kubeconfig", "--label", "--wait", "--force", "--timeout", "--allow-hub-as-member", "--server", "--token-ttl", "--token-duration"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("hub register --help does not mention %s", flag)
		}
	}
	_, stdout, _ = run(t, "unregister", "--help")
	for _, flag := range []string{"--member-context", "--hub-kubeconfig", "--secret-namespace", "--timeout", "--remove-placed"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("hub unregister --help does not mention %s", flag)
		}
	}
	for _, flag := range []string{"--server", "--token-ttl", "--token-duration", "--secret-key", "--label", "--wait", "--force", "--allow-hub-as-member"} {
		if strings.Contains(stdout, flag) {
			t.Errorf("hub unregister --help offers %s, which unregister would ignore", flag)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := run(t, "version")
	if code != exitOK || stderr != "" || !strings.Contains(stdout, runtime.Version()) || !strings.Contains(stdout, "Version:") {
		t.Errorf("hub version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"register"}, "NAME is missing"},
		{[]string{"unregister"}, "NAME is missing"},
		{[]string{"register", "a", "b"}, "want one NAME"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"register", "eu-1", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"register", "eu-1", "--timeout", "soon"}, "invalid argument"},
		{[]string{"register", "eu-1", "--label", "no-value"}, "want KEY=VALUE"},
		{[]string{"register", "eu-1", "--label", "env=a", "--label", "env=b"}, "given twice"},
		{[]string{"unregister", "eu-1", "--force"}, "unknown flag: --force"},
		// unregister has no flag it would ignore.
		{[]string{"unregister", "eu-1", "--server", "https://10.0.0.1:6443"}, "unknown flag: --server"},
		{[]string{"unregister", "eu-1", "--server=https://10.0.0.1:6443"}, "unknown flag: --server"},
		{[]string{"unregister", "eu-1", "--token-ttl", "1h"}, "unknown flag: --token-ttl"},
		{[]string{"unregister", "-token-ttl=1h", "eu-1"}, "unknown flag: --token-ttl"},
		{[]string{"unregister", "eu-1", "--token-duration", "1h"}, "unknown flag: --token-duration"},
		{[]string{"unregister", "eu-1", "--secret-key", "kc"}, "unknown flag: --secret-key"},
		{[]string{"unregister", "eu-1", "--label", "env=prod"}, "unknown flag: --label"},
		{[]string{"unregister", "eu-1", "--wait"}, "unknown flag: --wait"},
		{[]string{"unregister", "eu-1", "--allow-hub-as-member"}, "unknown flag: --allow-hub-as-member"},
		{[]string{"register", "eu-1", "--remove-placed"}, "unknown flag: --remove-placed"},
		{[]string{"register", "eu-1", "--allow-hub-as-member=maybe"}, "invalid argument"},
		{[]string{"version", "extra"}, "unknown command"},
		{[]string{"--probe-interval=often"}, "invalid argument"},
		{[]string{"run", "--probe-interval=often"}, "invalid argument"},
		{[]string{"run", "extra"}, "unknown command"},
		{[]string{"status", "--leader-elect"}, "unknown flag: --leader-elect"},
		{[]string{"status", "--fleet-bundle", "web"}, "want NAMESPACE/NAME"},
		{[]string{"status", "--fleet-bundle", "web/"}, "want NAMESPACE/NAME"},
		{[]string{"status", "--fleet-bundle", "/api"}, "want NAMESPACE/NAME"},
		{[]string{"status", "--fleet-bundle", "web/api/v1"}, "want NAMESPACE/NAME"},
		{[]string{"status", "--fleet-bundle", "Web/api"}, "is not a namespace name"},
		{[]string{"status", "--fleet-bundle=web/api", "--fleet-bundle=web/API"}, "is not a FleetBundle name"},
		{[]string{"status", "--max-age", "1s"}, "--max-age 1s is less than twice the hub's --heartbeat-interval"},
		{[]string{"status", "--max-age", "0s", "--fleet-bundle", "web/api"}, "use --max-age 2s or more"},
		{[]string{"status", "extra"}, "unknown command"},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
}

func TestFlagsBeforeOrAfterName(t *testing.T) {
	// A member kubeconfig that does not exist: the command line is fine (not a usage error),
	// the command fails (exit 1) on loading it, the same way whatever the order.
	missing := filepath.Join(t.TempDir(), "member.kubeconfig")
	for _, args := range [][]string{
		{"register", "eu-1", "--member-kubeconfig", missing, "--label", "env=prod"},
		{"register", "--member-kubeconfig", missing, "eu-1", "--label", "env=prod"},
		{"register", "--label=env=prod", "--member-kubeconfig=" + missing, "eu-1"},
		{"register", "-member-kubeconfig", missing, "eu-1"}, // Go's flag style, as before
		{"unregister", "--member-kubeconfig", missing, "eu-1"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "member kubeconfig") || !strings.Contains(stderr, missing) {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 1 on loading %s", strings.Join(args, " "), code, stdout, stderr, missing)
		}
	}
}

// TestRootFlagsKeepTheirDefaults: every flag the hub has always had, with its default, in both
// the Go style (-flag) and the double-dash style.
func TestRootFlagsKeepTheirDefaults(t *testing.T) {
	defaults := map[string]string{
		"kubeconfig":                "",
		"secret-namespace":          "configbundle-system",
		"secret-label":              "sigs.k8s.io/multicluster-runtime-kubeconfig",
		"secret-key":                "kubeconfig",
		"resync-period":             "10m0s",
		"probe-interval":            "10s",
		"member-qps":                "50",
		"member-burst":              "100",
		"install-crds":              "true",
		"metrics-bind-address":      ":8443",
		"metrics-secure":            "true",
		"metrics-cert-dir":          "",
		"health-probe-bind-address": ":8081",
		"leader-elect":              "false",
		"zap-devel":                 "false",
		"zap-encoder":               "",
		"zap-log-level":             "",
		"zap-stacktrace-level":      "",
		"zap-time-encoding":         "",
	}
	// hub run's, and the root's of the deprecated invocation without run.
	for _, cmd := range []func() *cobra.Command{newRunCommand, newRootCommand} {
		for name, def := range defaults {
			f := cmd().Flags().Lookup(name)
			if f == nil {
				t.Errorf("no flag --%s", name)
				continue
			}
			if f.DefValue != def {
				t.Errorf("--%s defaults to %q, want %q", name, f.DefValue, def)
			}
		}

		c := cmd()
		args := goStyleFlags(newRootCommand(), []string{"-secret-namespace=fleet", "--probe-interval", "2s", "-install-crds=false", "-leader-elect",
			"-zap-log-level=debug", "--member-qps=7.5", "-metrics-bind-address", "127.0.0.1:0"})
		if err := c.ParseFlags(args); err != nil {
			t.Fatalf("parsing %v: %v", args, err)
		}
		for name, want := range map[string]string{
			"secret-namespace": "fleet", "probe-interval": "2s", "install-crds": "false", "leader-elect": "true",
			"zap-log-level": "debug", "member-qps": "7.5", "metrics-bind-address": "127.0.0.1:0",
		} {
			if got := c.Flags().Lookup(name).Value.String(); got != want {
				t.Errorf("%s: --%s = %q, want %q", c.Name(), name, got, want)
			}
		}
	}
}

// TestBareHubStartsNothing: hub without arguments prints its help on stderr and exits 2, and
// nothing connects to the API server of its kubeconfig, here a listener that counts connections.
func TestBareHubStartsNothing(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var connections atomic.Int32
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			conn.Close()
		}
	}()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: "https://" + lis.Addr().String()}
	cfg.AuthInfos["hub"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "hub"}
	cfg.CurrentContext = "hub"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)

	done := make(chan struct{})
	var code int
	var stdout, stderr bytes.Buffer
	go func() {
		defer close(done)
		code = execute(context.Background(), nil, &stdout, &stderr)
	}()
	select {
	case <-done:
	case <-time.After(bareHubTimeout):
		t.Fatalf("hub without arguments has not returned after %v: it runs", bareHubTimeout)
	}
	if code != exitUsage || stdout.Len() != 0 || !strings.Contains(stderr.String(), "Usage:") || !strings.Contains(stderr.String(), "hub run") {
		t.Errorf("hub: exit %d, stdout %q, stderr %q; want exit 2 and the help on stderr", code, stdout.String(), stderr.String())
	}
	if n := connections.Load(); n != 0 {
		t.Errorf("hub without arguments connected %d times to the API server of its kubeconfig", n)
	}
}

// TestDeprecatedInvocationWarns: the flags of hub run without run still run the hub, saying on
// stderr that this is deprecated (here the hub fails at once on a kubeconfig that does not exist).
func TestDeprecatedInvocationWarns(t *testing.T) {
	for _, args := range [][]string{{"--leader-elect"}, {"-probe-interval=2s"}} {
		code, _, stderr := run(t, args...)
		if code != exitFailure || !strings.Contains(stderr, "deprecated") || !strings.Contains(stderr, "use hub run") {
			t.Errorf("hub %s: exit %d, stderr %q; want exit 1 after a deprecation warning", strings.Join(args, " "), code, stderr)
		}
	}
	if code, _, stderr := run(t, "run", "--leader-elect"); code != exitFailure || strings.Contains(stderr, "deprecated") {
		t.Errorf("hub run --leader-elect: exit %d, stderr %q; want exit 1 without a deprecation warning", code, stderr)
	}
}

func TestGoStyleFlags(t *testing.T) {
	root := newRootCommand()
	got := goStyleFlags(root, []string{"register", "-member-context", "-x", "-h", "-help", "--timeout=1s", "-timeout=2s", "-unknown", "--", "-timeout"})
	want := []string{"register", "--member-context", "-x", "-h", "--help", "--timeout=1s", "--timeout=2s", "-unknown", "--", "-timeout"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("goStyleFlags = %v, want %v", got, want)
	}
}

// TestStatusFlags: --fleet-bundle is repeatable, a value given twice counts once, and a command
// line that parses reaches the hub (here a kubeconfig that does not exist: exit 1, not 2).
func TestStatusFlags(t *testing.T) {
	var keys fleetBundleKeys
	for _, v := range []string{"web/api", "web/frontend", "web/api", "ops/web.v2"} {
		if err := keys.Set(v); err != nil {
			t.Fatalf("--fleet-bundle %s: %v", v, err)
		}
	}
	if got, want := keys.String(), "web/api,web/frontend,ops/web.v2"; got != want {
		t.Errorf("--fleet-bundle given 4 times = %s, want %s", got, want)
	}
	for _, args := range [][]string{
		{"status"},
		{"status", "--fleet-bundle", "web/api", "--fleet-bundle=web/frontend", "--max-age", "2s"},
		{"status", "-fleet-bundle=web/api", "-max-age=1m"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "hub kubeconfig") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 1 on loading the hub kubeconfig", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	_, stdout, _ := run(t, "status", "--help")
	for _, flag := range []string{"--fleet-bundle", "--max-age", "heartbeatIntervalSeconds"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("hub status --help does not mention %s", flag)
		}
	}
}

// TestCheckMaxAge: --max-age is refused below twice the heartbeat interval the Fleet publishes,
// or, before it is read or when it publishes none, below twice one second.
func TestCheckMaxAge(t *testing.T) {
	every := func(seconds int64) *hubv1alpha1.Fleet {
		return &hubv1alpha1.Fleet{Status: hubv1alpha1.FleetStatus{HeartbeatIntervalSeconds: seconds}}
	}
	for _, tc := range []struct {
		maxAge time.Duration
		fleet  *hubv1alpha1.Fleet
		says   string // "" for accepted
	}{
		{2 * time.Second, nil, ""},
		{1999 * time.Millisecond, nil, "use --max-age 2s or more"},
		{time.Second, every(0), "use --max-age 2s or more"},
		{20 * time.Second, every(10), ""},
		{19 * time.Second, every(10), "--max-age 19s is less than twice the hub's --heartbeat-interval (10s, Fleet status.heartbeatIntervalSeconds)"},
	} {
		err := checkMaxAge(tc.maxAge, tc.fleet)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("checkMaxAge(%s, %v) = %v, want accepted", tc.maxAge, tc.fleet, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("checkMaxAge(%s, %v) = %v, want an error saying %q", tc.maxAge, tc.fleet, err, tc.says)
		}
	}
}

// writeKubeconfig writes a kubeconfig with the contexts named, each of its own cluster and user,
// the current one current, and returns its path.
func writeKubeconfig(t *testing.T, current string, contexts ...string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for _, name := range contexts {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kc.CurrentContext = current
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMissingContextListsTheContexts: a context that is not in the kubeconfig, named by a flag
// or the kubeconfig's current one, fails (exit 1) naming the kubeconfig and its contexts,
// sorted, before anything is contacted.
func TestMissingContextListsTheContexts(t *testing.T) {
	kc := writeKubeconfig(t, "kind-hub", "kind-member-2", "kind-hub", "kind-member-1")
	noCurrent := writeKubeconfig(t, "gone", "b", "a")
	const contexts = "its contexts: kind-hub, kind-member-1, kind-member-2"
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"register", "eu-1", "--member-kubeconfig", kc, "--member-context", "kind-member-3", "--hub-kubeconfig", kc},
			[]string{"member kubeconfig", `no context "kind-member-3" in ` + kc, contexts}},
		{[]string{"register", "eu-1", "--member-kubeconfig", kc, "--member-context", "kind-member-1", "--hub-kubeconfig", kc, "--hub-context", "hub"},
			[]string{"hub kubeconfig", `no context "hub" in ` + kc, contexts}},
		{[]string{"unregister", "eu-1", "--member-kubeconfig", kc, "--member-context", "member-1", "--hub-kubeconfig", kc},
			[]string{"member kubeconfig", `no context "member-1"`, contexts}},
		{[]string{"status", "--hub-kubeconfig", kc, "--hub-context", "kind-hubb"},
			[]string{"hub kubeconfig", `no context "kind-hubb"`, contexts}},
		{[]string{"status", "--hub-kubeconfig", noCurrent},
			[]string{"hub kubeconfig", `no context "gone" in ` + noCurrent, "its contexts: a, b"}},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitFailure || stdout != "" {
			t.Errorf("hub %s: exit %d, stdout %q; want exit 1 and no output", strings.Join(tc.args, " "), code, stdout)
		}
		for _, want := range tc.says {
			if !strings.Contains(stderr, want) {
				t.Errorf("hub %s: stderr %q does not say %q", strings.Join(tc.args, " "), stderr, want)
			}
		}
	}
}

func TestContextsThere(t *testing.T) {
	many := make([]string, 0, 25)
	for i := range 25 {
		many = append(many, fmt.Sprintf("ctx-%02d", 24-i))
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "it has no contexts"},
		{[]string{"b"}, "its contexts: b"},
		{[]string{"kind-member-2", "kind-hub", "kind-member-1"}, "its contexts: kind-hub, kind-member-1, kind-member-2"},
		{many, "its contexts: ctx-00, ctx-01, ctx-02, ctx-03, ctx-04, ctx-05, ctx-06, ctx-07, ctx-08, ctx-09, ctx-10, ctx-11, ctx-12, ctx-13, ctx-14, ctx-15, ctx-16, ctx-17, ctx-18, ctx-19 and 5 more"},
	} {
		if got := contextsThere(tc.names); got != tc.want {
			t.Errorf("contextsThere(%v) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
