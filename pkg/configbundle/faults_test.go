package configbundle_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/configbundle"
)

// Timeouts of the fault tests.
const (
	// apiServerStartTimeout bounds starting a killed kube-apiserver again, or a second one.
	apiServerStartTimeout = time.Minute
	// relistTimeout bounds the hub's informers re-listing a member after an outage that nobody
	// told the reconciler about: client-go's reflectors back off up to 30 s between attempts. It
	// is far below the 10-minute resync, the only other way the hub would find out.
	relistTimeout = 90 * time.Second
	// recoveryHealTimeout bounds the heal of drift made while a member was away, from the moment
	// it answers again and the reconciler is told (Options.ResyncOn): it must not wait for the
	// informers' back-off.
	recoveryHealTimeout = 5 * time.Second
)

// memberOutage kills member's kube-apiserver, runs behindTheHubsBack against a second
// kube-apiserver on the member's etcd, starts the first one again on its port and returns when
// it answers. The hub's watches on the member break and come back by themselves; nothing tells
// the reconciler.
func memberOutage(t *testing.T, member string, behindTheHubsBack func(ctx context.Context, c client.Client) error) time.Time {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), apiServerStartTimeout)
	defer cancel()
	cp := planes[member]
	cfg, err := cp.SecondAPIServer(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	behind, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(cp.KillAPIServer()).To(Succeed())
	// Whatever happens below, later tests find the member answering.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), apiServerStartTimeout)
		defer cancel()
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Errorf("starting the kube-apiserver of %s again: %v", member, err)
		}
	})
	g.Expect(behindTheHubsBack(ctx, behind)).To(Succeed())
	g.Expect(cp.StartAPIServer(ctx)).To(Succeed())
	return time.Now()
}

// anyHeals makes converged accept any number of heals.
const anyHeals = -1

// converged returns nil once the member holds the ConfigMap the bundle asks for and the bundle's
// status records it, with heals heals (unless anyHeals).
func converged(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle, heals int64) error {
	bundle := &configbundlev1alpha1.ConfigBundle{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), bundle); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), cm); err != nil {
		return err
	}
	if drift := configbundle.Drift(configbundle.DesiredConfigMap(bundle), cm); len(drift) > 0 {
		return fmt.Errorf("ConfigMap %s differs from the bundle: %v", cm.Name, drift)
	}
	if ref := bundle.Status.ConfigMapRef; ref == nil || ref.UID != cm.UID || ref.ResourceVersion != cm.ResourceVersion {
		return fmt.Errorf("bundle %s: status.configMapRef %v does not record ConfigMap %s/%s", bundle.Name, ref, cm.UID, cm.ResourceVersion)
	}
	if heals != anyHeals && bundle.Status.Heals != heals {
		return fmt.Errorf("bundle %s: %d heals, want %d", bundle.Name, bundle.Status.Heals, heals)
	}
	return nil
}

// untilConverged polls until every bundle has converged with the heals given, and returns how
// long after since each one first was.
func untilConverged(t *testing.T, c client.Client, heals map[*configbundlev1alpha1.ConfigBundle]int64, since time.Time, timeout time.Duration) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	took := map[string]time.Duration{}
	NewWithT(t).Eventually(func() error {
		var errs []error
		for b, n := range heals {
			if _, done := took[b.Name]; done {
				continue
			}
			if err := converged(ctx, c, b, n); err != nil {
				errs = append(errs, err)
				continue
			}
			took[b.Name] = time.Since(since).Round(time.Millisecond)
		}
		return errors.Join(errs...)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "not converged after the member answered again (converged: %v)", took)
	return took
}

// createBundles creates bundles b1..bn in a namespace of their own and waits until each is
// Synced.
func createBundles(t *testing.T, member string, n int) []*configbundlev1alpha1.ConfigBundle {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), members[member]
	ns := newNamespace(t, member)
	bundles := make([]*configbundlev1alpha1.ConfigBundle, 0, n)
	for i := range n {
		b := newBundle(ns, fmt.Sprintf("b%d", i+1), fmt.Sprintf("message %d", i+1))
		g.Expect(c.Create(ctx, b)).To(Succeed())
		bundles = append(bundles, b)
	}
	for _, b := range bundles {
		g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	}
	return bundles
}

// TestFaultConfigMapDeletedWhileWatchDownIsRecreated: a managed ConfigMap that the hub last wrote
// itself, deleted while the hub's watch on the member is down, is recreated when the hub's
// informers re-list, though nobody tells the reconciler that the member was away. The re-list
// reports the deletion as a tombstone that carries the hub's own last write.
func TestFaultConfigMapDeletedWhileWatchDownIsRecreated(t *testing.T) {
	g, ctx, c := NewWithT(t), context.Background(), members[memberC]
	bundles := createBundles(t, memberC, 5)
	b1, b2 := bundles[0], bundles[1]

	// b2's ConfigMap is deleted once, so that its current ConfigMap is the hub's own write.
	g.Expect(c.Delete(ctx, configMapOf(b2))).To(Succeed())
	g.Eventually(func() error { return converged(ctx, c, b2, 1) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	cm := configMapOf(b2)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cached := &corev1.ConfigMap{}
		g.Expect(caches[memberC].GetCache().Get(ctx, client.ObjectKeyFromObject(cm), cached)).To(Succeed())
		g.Expect(cached.ResourceVersion).To(Equal(cm.ResourceVersion))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the hub's cache holds its own write")

	answered := memberOutage(t, memberC, func(ctx context.Context, behind client.Client) error {
		if err := behind.Delete(ctx, configMapOf(b2)); err != nil {
			return err
		}
		cm := configMapOf(b1)
		if err := behind.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		cm.Data["message"] = "changed behind the hub's back"
		return behind.Update(ctx, cm)
	})

	took := untilConverged(t, c, map[*configbundlev1alpha1.ConfigBundle]int64{b1: 1, b2: 2}, answered, relistTimeout)
	t.Logf("member answered again -> healed: %v", took)
	for _, b := range bundles[2:] {
		g.Expect(converged(ctx, c, b, 0)).To(Succeed())
	}
	g.Expect(slices.Sorted(maps.Keys(took))).To(Equal([]string{"b1", "b2"}))
}

// stormEdits is how many label patches a storm of bundle edits makes, stormWorkers how many
// clients make them at once.
const (
	stormEdits   = 200
	stormWorkers = 4
)

// storm patches the bundle's labels stormEdits times, as fast as the member takes it.
func storm(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle) error {
	errs := make(chan error, stormWorkers)
	for w := range stormWorkers {
		go func() {
			var err error
			for i := w; i < stormEdits && err == nil; i += stormWorkers {
				patch := fmt.Appendf(nil, `{"metadata":{"labels":{"storm":"%d"}}}`, i)
				err = c.Patch(ctx, &configbundlev1alpha1.ConfigBundle{ObjectMeta: b.ObjectMeta}, client.RawPatch(types.MergePatchType, patch))
			}
			errs <- err
		}()
	}
	var all []error
	for range stormWorkers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// healsMetric is configbundle_heals_total of a member.
func healsMetric(t *testing.T, member string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "configbundle_heals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == member {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// rejoin makes member leave the hub and join again with a new connection: what the reconciler
// remembers of it is forgotten and its cache starts afresh, as after a restart of the hub.
func rejoin(t *testing.T, member string) {
	t.Helper()
	cl, err := cluster.New(planes[member].Config, func(o *cluster.Options) {
		o.Scheme = scheme
		configbundle.ConfigureCache(&o.Cache)
	})
	if err != nil {
		t.Fatalf("connecting to %s: %v", member, err)
	}
	if err := provider.Add(context.Background(), multicluster.ClusterName(member), cl); err != nil {
		t.Fatalf("adding %s: %v", member, err)
	}
	caches[member] = cl
}

// TestFaultBundleEditStormIsNoHeal: following the bundle is never counted as a heal, however fast it
// changes and across a restart of the hub; a change made by someone else amid such a storm is
// one heal, in the status, the metric and the Events alike.
func TestFaultBundleEditStormIsNoHeal(t *testing.T) {
	c := members[memberC]
	ns := newNamespace(t, memberC)
	tests := []struct {
		name    string
		during  func(t *testing.T, b *configbundlev1alpha1.ConfigBundle) // run while the storm blows
		heals   int64
		healing []string
	}{
		{name: "a storm of label edits"},
		{name: "a storm across a hub restart", during: func(t *testing.T, _ *configbundlev1alpha1.ConfigBundle) { rejoin(t, memberC) }},
		{name: "a change by someone else amid the storm", heals: 1, healing: []string{configbundle.DriftData}, during: func(t *testing.T, b *configbundlev1alpha1.ConfigBundle) {
			ctx := context.Background()
			if err := update(ctx, c, configMapOf(b), func(cm *corev1.ConfigMap) { cm.Data["message"] = "someone else's" }); err != nil {
				t.Errorf("changing the ConfigMap: %v", err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ctx := NewWithT(t), context.Background()
			b := newBundle(ns, fmt.Sprintf("storm-%d", i), "calm")
			g.Expect(c.Create(ctx, b)).To(Succeed())
			g.Eventually(func() error { return converged(ctx, c, b, 0) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
			metricBefore := healsMetric(t, memberC)

			stormed := make(chan error, 1)
			go func() { stormed <- storm(ctx, c, b) }()
			if tt.during != nil {
				tt.during(t, b)
			}
			g.Expect(<-stormed).To(Succeed())

			// Converged, and quiet; then the status, the metric and the Events must agree.
			g.Eventually(func() error { return converged(ctx, c, b, anyHeals) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
			g.Consistently(func() error { return converged(ctx, c, b, anyHeals) }).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			notes, err := events(ctx, c, b, configbundlev1alpha1.DriftHealedEvent)
			g.Expect(err).NotTo(HaveOccurred())
			healedEvents, err := occurrences(ctx, c, b, configbundlev1alpha1.DriftHealedEvent)
			g.Expect(err).NotTo(HaveOccurred())
			counted := map[string]int64{"status.heals": b.Status.Heals, "configbundle_heals_total": int64(healsMetric(t, memberC) - metricBefore), "DriftHealed Events": int64(healedEvents)}
			g.Expect(counted).To(Equal(map[string]int64{"status.heals": tt.heals, "configbundle_heals_total": tt.heals, "DriftHealed Events": tt.heals}), "Events: %q", notes)
			for i, drift := range tt.healing {
				g.Expect(notes[i]).To(ContainSubstring(drift))
			}
		})
	}
}

// deletedBundles is how many bundles TestFaultDeletionStormGetsNoNewConfigMap deletes at once.
const deletedBundles = 50

// TestFaultDeletionStormGetsNoNewConfigMap: when many bundles are deleted at once, while the hub is
// busy healing their ConfigMaps, the garbage collector deletes the ConfigMaps, and the hub, whose
// cache may still hold a bundle when its ConfigMap's deletion arrives, never creates a ConfigMap
// for a bundle that is gone.
func TestFaultDeletionStormGetsNoNewConfigMap(t *testing.T) {
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	bundles := createBundles(t, memberA, deletedBundles)
	ns := bundles[0].Namespace

	// Every ConfigMap created in the namespace from now on is seen, however short its life.
	wc, err := client.NewWithWatch(planes[memberA].Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	list := &corev1.ConfigMapList{}
	g.Expect(wc.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(deletedBundles))
	w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	for i := range list.Items {
		list.Items[i].Data["message"] = "tampered"
		g.Expect(c.Update(ctx, &list.Items[i])).To(Succeed())
	}
	g.Expect(c.DeleteAllOf(ctx, &configbundlev1alpha1.ConfigBundle{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the garbage collector deletes the ConfigMaps")

	var created []string
	quiet := time.After(quietPeriod)
	for done := false; !done; {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of ConfigMaps ended")
			}
			if e.Type == watch.Added {
				created = append(created, e.Object.(*corev1.ConfigMap).Name)
			}
		case <-quiet:
			done = true
		}
	}
	g.Expect(created).To(BeEmpty(), "ConfigMaps created for deleted bundles")
}

// TestFaultDriftWhileDownIsHealedOnRecovery: drift made while a member was away is healed as soon as
// the member answers again and the reconciler is told so (the hub's provider calls the function
// of Options.ResyncOn), without waiting for the informers to re-list; a bundle changed meanwhile
// is followed, not healed.
func TestFaultDriftWhileDownIsHealedOnRecovery(t *testing.T) {
	g, ctx, c := NewWithT(t), context.Background(), members[memberC]
	bundles := createBundles(t, memberC, 5)
	b1, b2, b3, b4 := bundles[0], bundles[1], bundles[2], bundles[3]

	answered := memberOutage(t, memberC, func(ctx context.Context, behind client.Client) error {
		tamper := func(b *configbundlev1alpha1.ConfigBundle, mutate func(*corev1.ConfigMap)) error {
			return update(ctx, behind, configMapOf(b), mutate)
		}
		return errors.Join(
			tamper(b1, func(cm *corev1.ConfigMap) { cm.Data["message"] = "changed while the hub was away" }),
			behind.Delete(ctx, configMapOf(b2)),
			tamper(b3, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"added": "while-away"} }),
			update(ctx, behind, b4, func(b *configbundlev1alpha1.ConfigBundle) {
				b.Spec.Message = "the bundle changed while the hub was away"
			}),
		)
	})
	resyncMember := resync.Load()
	g.Expect(resyncMember).NotTo(BeNil(), "the reconciler registered its resync")
	(*resyncMember)(memberC)

	want := map[*configbundlev1alpha1.ConfigBundle]int64{b1: 1, b2: 1, b3: 1, b4: 0, bundles[4]: 0}
	took := untilConverged(t, c, want, answered, recoveryHealTimeout)
	t.Logf("member answered again -> converged: %v", took)
	// When the informers catch up, what they bring undoes nothing.
	g.Consistently(func() error {
		var errs []error
		for b, heals := range want {
			errs = append(errs, converged(ctx, c, b, heals))
		}
		return errors.Join(errs...)
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	cm := configMapOf(b4)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.Data["message"]).To(Equal("the bundle changed while the hub was away"))
}

// Another controller rewriting a managed ConfigMap every fightInterval, for fightDuration.
const (
	fightInterval = 50 * time.Millisecond
	fightDuration = 5 * time.Second
)

// eventsAbout returns the Events with the given reason about a bundle.
func eventsAbout(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(b.Namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == b.Name && e.Regarding.Kind == "ConfigBundle" && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

// statusWrites counts the writes of a bundle's status that memberA served since since, and
// those it refused.
func statusWrites(t *testing.T, b *configbundlev1alpha1.ConfigBundle, since time.Time) (served, refused int) {
	t.Helper()
	for _, w := range writesSince(t, memberA, b.Namespace, since) {
		switch {
		case w.Resource != "configbundles" || w.Subresource != "status" || w.Name != b.Name:
		case w.Code < 300:
			served++
		default:
			refused++
		}
	}
	return served, refused
}

// writesSince returns the writes to a namespace that a member with Options.AuditWrites served
// since since, refused ones included.
func writesSince(t *testing.T, member, namespace string, since time.Time) []controlplane.Write {
	t.Helper()
	writes, err := planes[member].Writes()
	if err != nil {
		t.Fatal(err)
	}
	var out []controlplane.Write
	for _, w := range writes {
		if w.Namespace == namespace && !w.At.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

// TestFaultFightingWriter: another writer that keeps rewriting a managed ConfigMap gets one heal per
// change, as ever, but the DriftHealed Events are aggregated into a series, the fight is
// reported once with a Warning that names what keeps changing, and the heals are counted in
// the bundle's status by one write per HealStatusDelay (1 s), not one per heal, exactly once
// things are quiet.
func TestFaultFightingWriter(t *testing.T) {
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	b := createBundles(t, memberA, 1)[0]
	metricBefore := healsMetric(t, memberA)
	fightStart := time.Now()

	tampers := 0
	ticker := time.NewTicker(fightInterval)
	for end := time.Now().Add(fightDuration); time.Now().Before(end); <-ticker.C {
		cm := configMapOf(b)
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			continue
		}
		cm.Data["message"] = fmt.Sprintf("the other writer's %d", tampers)
		if err := c.Update(ctx, cm); err == nil {
			tampers++
		}
	}
	ticker.Stop()

	g.Eventually(func() error { return converged(ctx, c, b, anyHeals) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "healing continues")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	t.Logf("%d changes by the other writer, %d heals", tampers, b.Status.Heals)
	g.Expect(b.Status.Heals).To(BeNumerically(">", configbundle.FightHeals))
	g.Expect(b.Status.Heals).To(BeNumerically("<=", tampers), "at most one heal per change")
	g.Expect(healsMetric(t, memberA)-metricBefore).To(BeEquivalentTo(b.Status.Heals), "configbundle_heals_total")
	// The writes are counted from the fight's start until now: the fight, and the heals that its
	// last changes still cost (longer on a loaded machine). A write the API server refused (a
	// conflict: the cached bundle lagged behind the hub's own last write, more often on a loaded
	// machine) is retried on a fresh read: it is an attempt, not a status written.
	elapsed := time.Since(fightStart)
	writes, refused := statusWrites(t, b, fightStart)
	t.Logf("%d status writes (and %d refused) for %d heals in %v", writes, refused, b.Status.Heals, elapsed.Round(time.Millisecond))
	g.Expect(writes).To(BeNumerically("<=", int(elapsed/time.Second)+2), "one status write per second, at most")

	g.Eventually(func(g Gomega) {
		healed, err := eventsAbout(ctx, c, b, configbundlev1alpha1.DriftHealedEvent)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(summaries(healed)).To(ConsistOf(HavePrefix("series")), "one DriftHealed Event, a series")
		fights, err := eventsAbout(ctx, c, b, configbundlev1alpha1.FightingWriterEvent)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fights).To(HaveLen(1), "the fight is reported once")
		g.Expect(fights[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(fights[0].Series).To(BeNil(), "once per fight")
		g.Expect(fights[0].Note).To(And(ContainSubstring(configbundle.DriftData), ContainSubstring(memberA)))
		t.Logf("%s", fights[0].Note)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// summaries shortens Events for a failure message: series or single, the resourceVersions of
// the objects referred to, and the note.
func summaries(events []eventsv1.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		kind := "single"
		if e.Series != nil {
			kind = fmt.Sprintf("series of %d", e.Series.Count)
		}
		related := ""
		if e.Related != nil {
			related = e.Related.ResourceVersion
		}
		out = append(out, fmt.Sprintf("%s (regarding resourceVersion %q, related %q): %s", kind, e.Regarding.ResourceVersion, related, e.Note))
	}
	return out
}
