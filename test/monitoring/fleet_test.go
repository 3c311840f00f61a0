package monitoring

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

const (
	startTimeout = 3 * time.Minute
	joinTimeout  = time.Minute
	timeout      = 30 * time.Second
	interval     = 100 * time.Millisecond
	// fightHeals is how many heals within a minute make a fight (configbundle.FightHeals).
	fightHeals = 10
)

// monitored is a hub binary managing two members on real control planes, in the state the test
// scrapes: a FleetBundle placed in both members, and another that cannot be placed in m2 (a local
// ConfigBundle of its name there: Conflict); a FleetBundle whose staged rollout halted (its
// canary, m2, refuses its ConfigMap: Stalled); m1 healthy, with drift healed and one fight; m2
// with a ConfigBundle whose ConfigMap a ResourceQuota keeps refusing (CreateFailed, retried:
// reconcile errors and a failed bundle).
type monitored struct {
	*fleet.Fleet
}

// startFleet starts the fleet; everything stops when the test ends.
func startFleet(t *testing.T) *monitored {
	t.Helper()
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	f := &monitored{fleet.MustStart(t, fleet.Options{
		Members: controlplane.Named(controlplane.Options{}, "m1", "m2"),
		// Built in the hub's own module (-C), with its go.mod's versions, not this module's.
		BuildFlags: []string{"-C", root},
		HubArgs:    []string{"--probe-interval=1s", "--heartbeat-interval=1s"},
		Dir:        t.TempDir(),
		Timeout:    joinTimeout, // the hub's start and the members joining
	})}
	hub, err := f.StartHub(ctx, fleet.HubName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hub log (tail):\n%s", hub.LogTail(8000))
		}
	})
	for _, m := range f.Members() {
		f.MustRegister(t, m.Name)
	}
	for _, m := range f.Members() {
		if err := f.WaitReady(ctx, m.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// makeHistory brings the fleet into the state its doc comment describes.
func (f *monitored) makeHistory(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	m1, m2 := f.Member("m1").Client, f.Member("m2").Client
	for _, c := range []client.Client{f.Hub, m1, m2} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}); err != nil {
			t.Fatal(err)
		}
	}
	f.blockConfigMaps(t, m2, "quota")
	if err := m2.Create(ctx, fleet.NewBundle("quota", "blocked", "refused")); err != nil {
		t.Fatal(err)
	}

	// FleetBundles place only into the members of the ClusterSets bound to their namespace: the
	// set global (every member) is bound into both namespaces of the test's FleetBundles.
	f.MustBindGlobal(t, "monitoring", "quota")

	// Both: a FleetBundle placed into them (placement latency).
	for _, m := range []string{"m1", "m2"} {
		if err := f.LabelMember(ctx, m, map[string]string{"monitoring": "yes"}); err != nil {
			t.Fatal(err)
		}
	}
	placed := fleet.NewFleetBundle("monitoring", "placed", map[string]string{"monitoring": "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	if err := f.Hub.Create(ctx, placed); err != nil {
		t.Fatal(err)
	}
	for _, c := range []client.Client{m1, m2} {
		poll(t, "the placed ConfigMap", configMapSays(c, fleet.NewBundle("monitoring", "placed", ""), "placed"))
	}
	// Both: a FleetBundle that m2's own bundle of its name keeps out (Conflict).
	if err := m2.Create(ctx, fleet.NewBundle("monitoring", "conflicted", "m2's own")); err != nil {
		t.Fatal(err)
	}
	conflicted := fleet.NewFleetBundle("monitoring", "conflicted", map[string]string{"monitoring": "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	if err := f.Hub.Create(ctx, conflicted); err != nil {
		t.Fatal(err)
	}

	// Both: a FleetBundle whose rollout starts with m2 as its canary, where the ResourceQuota of
	// namespace quota refuses its ConfigMap: the rollout halts (a first revision has nothing to
	// roll back to), m1 never gets it, and its Stalled condition is True.
	for _, c := range []client.Client{f.Hub, m1} {
		if err := fleet.EnsureNamespace(ctx, c, "quota"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.LabelMember(ctx, "m2", map[string]string{"ring": "canary"}); err != nil {
		t.Fatal(err)
	}
	halted := fleet.NewFleetBundle("quota", "halted", map[string]string{"monitoring": "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: "halted"})
	halted.Spec.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{
		{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}},
	}}
	if err := f.Hub.Create(ctx, halted); err != nil {
		t.Fatal(err)
	}
	poll(t, "the rollout of quota/halted to halt", func(ctx context.Context) (bool, error) {
		fb := &hubv1alpha1.FleetBundle{}
		if err := f.Hub.Get(ctx, client.ObjectKeyFromObject(halted), fb); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(fb.Status.Conditions, hubv1alpha1.StalledCondition), nil
	})

	// m1: a bundle, and drift healed often enough to be a fight.
	b := fleet.NewBundle("monitoring", "web", "hello")
	if err := m1.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	poll(t, "the ConfigMap of m1's bundle", configMapSays(m1, b, "hello"))
	for i := range fightHeals {
		tamper(t, m1, b, fmt.Sprintf("tampered %d", i))
		poll(t, "the heal of m1's ConfigMap", configMapSays(m1, b, "hello"))
	}
}

// blockConfigMaps makes a namespace of a member refuse every new ConfigMap: a ResourceQuota of
// none, with the status the quota controller (which these control planes lack) would write.
func (f *monitored) blockConfigMaps(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	none := corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: none}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: none, Used: none}
	if err := c.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
}

// configMapSays is true once a bundle's ConfigMap has the message.
func configMapSays(c client.Client, b *configbundlev1alpha1.ConfigBundle, message string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		got, err := fleet.Message(ctx, c, client.ObjectKeyFromObject(b))
		return got == message, client.IgnoreNotFound(err)
	}
}

// tamper changes a managed ConfigMap's message, as another writer would.
func tamper(t *testing.T, c client.Client, b *configbundlev1alpha1.ConfigBundle, message string) {
	t.Helper()
	if err := fleet.Tamper(context.Background(), c, client.ObjectKeyFromObject(b), message); err != nil {
		t.Fatalf("changing the ConfigMap %s: %v", b.Name, err)
	}
}

// historyShown is what makeHistory did, as the hub's metrics show it.
var historyShown = []string{
	`configbundle_heals_total{cluster="m1"} 10`,
	`configbundle_fights_total{cluster="m1"} 1`,
	`configbundle_reconcile_errors_total{cluster="m2",reason="CreateFailed"}`,
	`configbundle_member_failed_bundles{cluster="m2"} 2`, // quota/blocked and quota/halted
	`configbundle_member_last_probe_success_timestamp_seconds{cluster="m2"}`,
	`configbundle_member_probe_duration_seconds_count{cluster="m2"}`,
	`configbundle_placement_latency_seconds_count{cluster="m1"}`,
	`configbundle_placement_latency_seconds_count{cluster="m2"}`,
	`configbundle_fleetbundle_failed{name="placed",namespace="monitoring"} 0`,
	`configbundle_fleetbundle_selected{name="conflicted",namespace="monitoring"} 2`,
	`configbundle_fleetbundle_ready{name="conflicted",namespace="monitoring"} 1`,
	`configbundle_fleetbundle_failed{name="conflicted",namespace="monitoring"} 1`,
	`configbundle_fleetbundle_updated{name="placed",namespace="monitoring"} 2`,
	`configbundle_fleetbundle_rollout_stalled{name="placed",namespace="monitoring"} 0`,
	`configbundle_fleetbundle_updated{name="halted",namespace="quota"} 1`,
	`configbundle_fleetbundle_failed{name="halted",namespace="quota"} 1`,
	`configbundle_fleetbundle_rollout_stalled{name="halted",namespace="quota"} 1`,
}

// scrapeShowing scrapes the hub once its metrics show every line of want. Series the hub does
// not export (yet) are not waited for beyond the timeout: the test reports them, and the
// expressions' check then names the metrics missing.
func (f *monitored) scrapeShowing(t *testing.T, want []string) string {
	t.Helper()
	var text string
	var missing []string
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		if text, err = f.ScrapeHub(fleet.HubName); err != nil {
			return false, nil
		}
		missing = missing[:0]
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0, nil
	})
	if text == "" {
		t.Fatal("could not scrape the hub")
	}
	if len(missing) > 0 {
		t.Errorf("after %v the scrape still lacks:\n  %s", timeout, strings.Join(missing, "\n  "))
	}
	return text
}

// pause freezes a member's API server until the test ends.
func (f *monitored) pause(t *testing.T, member string) {
	t.Helper()
	cp := f.Member(member).Plane
	if err := cp.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Resume() })
}

// poll waits until cond holds, at most timeout.
func poll(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
