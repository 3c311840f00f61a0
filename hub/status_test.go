package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// TestStatusMentionsUnownedMembers: `hub status` says how many members no live replica manages
// (the Fleet's status.clusters.unowned), and says nothing of it when none is.
func TestStatusMentionsUnownedMembers(t *testing.T) {
	for _, tc := range []struct {
		unowned int32
		want    string
	}{
		{2, "\nUnowned: 2 of 3 members are managed by no live hub replica"},
		{0, ""},
	} {
		fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName},
			Status: hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 1, Unowned: tc.unowned}}}
		var out strings.Builder
		printStatus(&out, &hubState{fleet: fleet}, nil, time.Now())
		switch got := out.String(); {
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("unowned %d: hub status printed\n%s\nwant it to say %q", tc.unowned, got, tc.want)
		case tc.want == "" && strings.Contains(got, "Unowned"):
			t.Errorf("unowned 0: hub status printed\n%s\nwant no word of unowned members", got)
		}
	}
}

// TestStatusListsDriftedBundles: `hub status` counts each member's drifted bundles and lists
// them, and its gate fails on them as on any failed bundle.
func TestStatusListsDriftedBundles(t *testing.T) {
	now := time.Now()
	fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName},
		Status: hubv1alpha1.FleetStatus{
			Clusters:      hubv1alpha1.ClusterCounts{Total: 1, Ready: 1},
			Bundles:       hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 2, Drifted: 2},
			HeartbeatTime: &metav1.Time{Time: now},
			Conditions: []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.BundlesFailedReason,
				Message: "2 of 3 ConfigBundles have failed, in m1 (2)"}},
		}}
	member := hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m1"},
		Status: hubv1alpha1.MemberClusterStatus{
			Bundles: hubv1alpha1.BundleCounts{Total: 3, Ready: 1, Failed: 2, Drifted: 2},
			FailedBundles: []hubv1alpha1.FailedBundle{
				{Namespace: "web", Name: "a", Reason: configbundlev1alpha1.DriftedReason},
				{Namespace: "web", Name: "b", Reason: configbundlev1alpha1.DriftedReason},
			},
		}}
	st := &hubState{fleet: fleet, members: []hubv1alpha1.MemberCluster{member}}
	var out strings.Builder
	printStatus(&out, st, nil, now)
	for _, want := range []string{"DRIFTED", "\nDrifted (driftPolicy Report", "m1:web/a, m1:web/b"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("hub status printed\n%s\nwant it to say %q", out.String(), want)
		}
	}
	if err := st.gate(nil, now, defaultMaxAge); err == nil {
		t.Errorf("the gate passed a fleet with drifted bundles")
	}
}

// TestStatusNamesHeldBackRevisions: against a hub whose Fleet is Ready and fresh, hub status names
// the paused member ro2 and the FleetBundle it holds back (web: ro2 holds revision 1, current
// 2), says so in its closing line and exits 0; with --fail-on-paused it exits 1 saying why. A
// FleetBundle that selects no paused member passes --fail-on-paused alone (--fleet-bundle).
func TestStatusNamesHeldBackRevisions(t *testing.T) {
	cp, c := startHubControlPlane(t, controlplane.Options{})
	now := metav1.Now()
	ready := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: reason, Message: "ready", LastTransitionTime: now, ObservedGeneration: 1}}
	}
	f := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}}
	mustCreate(t, c, f)
	f.Status = hubv1alpha1.FleetStatus{HeartbeatTime: &now, HeartbeatIntervalSeconds: 10, Conditions: ready("AllMembersReady"),
		Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 3, Paused: 1}}
	mustUpdateStatus(t, c, f)
	for name, paused := range map[string]bool{"ro1": false, "ro2": true, "lab-1": false} {
		env := "prod"
		if name == "lab-1" {
			env = "lab"
		}
		mustCreate(t, c, &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": env}},
			Spec: hubv1alpha1.MemberClusterSpec{Paused: paused, SecretRef: hubv1alpha1.SecretReference{Namespace: "configbundle-system", Name: name}}})
	}
	for name, st := range map[string]hubv1alpha1.FleetBundleStatus{
		"web": {Clusters: hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1},
			CurrentRevision: 2, UpdateRevision: 2, HeldRevisions: []int64{1, 2}},
		"lab": {Clusters: hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1},
			CurrentRevision: 1, UpdateRevision: 1, HeldRevisions: []int64{1}},
	} {
		env := "prod"
		if name == "lab" {
			env = "lab"
		}
		fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
			Spec: goTemplate(envIn(env), name, nil)}
		mustCreate(t, c, fb)
		fb.Status = st
		fb.Status.ObservedGeneration, fb.Status.Conditions = fb.Generation, ready(hubv1alpha1.AllReadyReason)
		mustUpdateStatus(t, c, fb)
	}

	status := func(args ...string) (int, string, string) {
		return run(t, append([]string{"status", "--hub-kubeconfig", cp.KubeconfigPath}, args...)...)
	}
	code, stdout, stderr := status()
	for _, want := range []string{
		"Paused for maintenance (placement writes nothing to them until hub resume): ro2\n",
		"  FleetBundle default/web held back: paused ro2; revision 1 held older than current revision 2\n",
		"Healthy: the Fleet is Ready and a hub confirmed it within 30s; paused: ro2, holding back default/web on older revisions\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("hub status: stdout\n%s\nwant it to say %q", stdout, want)
		}
	}
	if code != exitOK || strings.Contains(stdout, "default/lab held back") {
		t.Errorf("hub status: exit %d, stdout %s, stderr %q; want exit 0, and nothing held back of default/lab", code, stdout, stderr)
	}

	code, _, stderr = status("--fail-on-paused")
	if want := "--fail-on-paused: paused: ro2; FleetBundle default/web: revision 1 held older than current revision 2"; code != exitFailure || !strings.Contains(stderr, want) {
		t.Errorf("hub status --fail-on-paused: exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
	code, _, stderr = status("--fail-on-paused", "--fleet-bundle", "default/web")
	if code != exitFailure || !strings.Contains(stderr, "paused: ro2") {
		t.Errorf("hub status --fail-on-paused --fleet-bundle default/web: exit %d, stderr %q; want exit 1 naming ro2", code, stderr)
	}
	code, stdout, stderr = status("--fail-on-paused", "--fleet-bundle", "default/lab")
	if code != exitOK || strings.Contains(stdout, "held back") || strings.Contains(stdout, "; paused") {
		t.Errorf("hub status --fail-on-paused --fleet-bundle default/lab: exit %d, stdout %s, stderr %q; want exit 0, nothing held back", code, stdout, stderr)
	}
}

// mustCreate creates obj.
func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}

// mustUpdateStatus writes obj's status.
func mustUpdateStatus(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Status().Update(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}
