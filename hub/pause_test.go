package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
)

func TestPauseUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"pause"}, "the member's NAME is missing"},
		{[]string{"resume"}, "the member's NAME is missing"},
		{[]string{"pause", "a", "b"}, "want one NAME, got 2 arguments: a b"},
		{[]string{"resume", "eu-1", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"pause", "eu-1", "-n", "apps"}, "unknown shorthand flag: 'n'"},
		{[]string{"pause", "eu-1", "--timeout", "1s"}, "unknown flag: --timeout"},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
}

// TestPauseFlags: pause and resume take the hub's flags, in either flag style, and a command
// line that parses reaches the hub: a kubeconfig that does not exist, or a hub that does not
// answer, fails (exit 1, not 2); so does a NAME no member can have.
func TestPauseFlags(t *testing.T) {
	unreachable := writeKubeconfig(t, "hub", "hub") // https://127.0.0.1:1
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"pause", "eu-1"}, "hub kubeconfig"},
		{[]string{"resume", "eu-1", "--hub-context", "hub"}, "hub kubeconfig"},
		{[]string{"pause", "-hub-kubeconfig=" + filepath.Join(t.TempDir(), "absent"), "eu-1"}, "hub kubeconfig"},
		{[]string{"pause", "eu-1", "--hub-kubeconfig", unreachable}, "127.0.0.1:1"},
		{[]string{"resume", "--hub-kubeconfig", unreachable, "--hub-context", "hub", "eu-1"}, "127.0.0.1:1"},
		{[]string{"pause", "EU_1"}, `"EU_1" is not a member`}, // no member can have that name: exit 1, as for any other
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, tc.says) {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
	for _, sub := range []string{"pause", "resume"} {
		code, stdout, stderr := run(t, sub, "--help")
		if code != exitOK || stderr != "" {
			t.Errorf("hub %s --help: exit %d, stderr %q", sub, code, stderr)
		}
		for _, says := range []string{"--hub-kubeconfig", "--hub-context", "spec.paused", "placement writes"} {
			if !strings.Contains(strings.ToLower(stdout), says) {
				t.Errorf("hub %s --help does not mention %s", sub, says)
			}
		}
	}
	_, stdout, _ := run(t, "--help")
	for _, sub := range []string{"pause", "resume"} {
		if !strings.Contains(stdout, "  "+sub+" ") {
			t.Errorf("hub --help does not list %s", sub)
		}
	}
}

// TestPauseCommands runs pause and resume against a real hub API server: each sets spec.paused
// with a patch that leaves the rest of the MemberCluster as it was, says so once done and again
// when there was nothing to do (exit 0 both times); a member that does not exist fails (exit 1).
func TestPauseCommands(t *testing.T) {
	cp, c := startHubControlPlane(t, controlplane.Options{})
	mc := &hubv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "eu-1", Labels: map[string]string{"env": "prod"}},
		Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "eu-1"}},
	}
	if err := c.Create(t.Context(), mc); err != nil {
		t.Fatal(err)
	}
	pausedIs := func(want bool) {
		t.Helper()
		got := &hubv1alpha1.MemberCluster{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(mc), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Paused != want || got.Spec.SecretRef != mc.Spec.SecretRef || got.Labels["env"] != "prod" {
			t.Errorf("MemberCluster eu-1 = spec %+v, labels %v; want paused %t and the rest as it was", got.Spec, got.Labels, want)
		}
	}
	for _, step := range []struct {
		sub, says string
		paused    bool
	}{
		{"pause", "membercluster.hub.configbundle.dev/eu-1 paused\n", true},
		{"pause", "membercluster.hub.configbundle.dev/eu-1 is paused already\n", true},
		{"resume", "membercluster.hub.configbundle.dev/eu-1 resumed\n", false},
		{"resume", "membercluster.hub.configbundle.dev/eu-1 is not paused\n", false},
		{"pause", "membercluster.hub.configbundle.dev/eu-1 paused\n", true},
	} {
		code, stdout, stderr := run(t, step.sub, mc.Name, "--hub-kubeconfig", cp.KubeconfigPath)
		if code != exitOK || stderr != "" || stdout != step.says {
			t.Errorf("hub %s eu-1: exit %d, stdout %q, stderr %q; want exit 0 and %q", step.sub, code, stdout, stderr, step.says)
		}
		pausedIs(step.paused)
	}
	for _, sub := range []string{"pause", "resume"} {
		code, stdout, stderr := run(t, sub, "absent", "--hub-kubeconfig", cp.KubeconfigPath)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "no MemberCluster absent on the hub") {
			t.Errorf("hub %s absent: exit %d, stdout %q, stderr %q; want exit 1, not found", sub, code, stdout, stderr)
		}
	}
}

// TestStatusNamesPausedMembers: `hub status` names the paused members under its table of
// members, and says nothing of pausing when none is.
func TestStatusNamesPausedMembers(t *testing.T) {
	member := func(name string, paused bool) hubv1alpha1.MemberCluster {
		return hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hubv1alpha1.MemberClusterSpec{Paused: paused}}
	}
	fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}}
	var out strings.Builder
	printStatus(&out, &hubState{fleet: fleet, members: []hubv1alpha1.MemberCluster{member("us-1", true), member("eu-1", false), member("ap-1", true)}}, nil, time.Now())
	if want := "\nPaused for maintenance (placement writes nothing to them until hub resume): ap-1, us-1\n"; !strings.Contains(out.String(), want) {
		t.Errorf("hub status printed\n%s\nwant it to say %q", out.String(), want)
	}
	out.Reset()
	printStatus(&out, &hubState{fleet: fleet, members: []hubv1alpha1.MemberCluster{member("eu-1", false)}}, nil, time.Now())
	if strings.Contains(out.String(), "Paused") {
		t.Errorf("hub status printed\n%s\nwith no member paused, want no word of pausing", out.String())
	}
}
