package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// The placement phase: a FleetBundle placed in every member, its template changed
// cfg.Placements times, each change timed until the updated ConfigMap is seen in every member;
// alternately, the floor makes the same change to a ConfigBundle it writes to every member itself.
const (
	// placementNS holds the FleetBundles on the hub, and so their placed bundles in the members.
	placementNS = "placement"
	// placementName is the FleetBundle whose template changes, and the floor's ConfigBundle.
	placementName = "pb"
	// floorNS holds the floor's ConfigBundles in the members: no FleetBundle names it, so the hub
	// places nothing there; its member reconciler turns them into ConfigMaps as for any bundle.
	floorNS = "placement-floor"
	// placementLabel selects the members: every member of the benchmark carries it; the
	// black-hole MemberClusters do not (they would never be Ready).
	placementLabel = "bench-placement"
	// placementTimeout bounds the wait for one change to be seen in every member.
	placementTimeout = 30 * time.Second
	// placementSettle is how long after the last change its writes are counted: the last
	// status writes are done by then.
	placementSettle = 3 * time.Second
)

// placementResults are the figures of the placement phase.
type placementResults struct {
	Members int
	// Hub and Floor are the latencies of the template changes, the max over the members each;
	// Templated those of the templated FleetBundle's (placement_templated.go).
	Hub, Floor, Templated latencies
	// Sourced are the latencies of the source changes of the sourced FleetBundle
	// (placement_sourced.go); SourcedCreate its first placement; CachedConfigMaps the
	// ConfigMaps in the hub's cache then (its sources only).
	Sourced          latencies
	SourcedCreate    time.Duration
	SourcedErrors    int
	CachedConfigMaps float64
	// CachedSecrets is the number of Secrets in the hub's cache then: the members' kubeconfig
	// Secrets alone, as no FleetBundle has a Secret source.
	CachedSecrets float64
	// HubCreate, FloorCreate and TemplatedCreate time the first placement: FleetBundle create,
	// and the floor's.
	HubCreate, FloorCreate, TemplatedCreate time.Duration
	HubErrors, FloorErrors, TemplatedErrors int
	// TemplatedUpdates are the hub's updates of the templated bundle in the members during the
	// template changes.
	TemplatedUpdates int
	// ChangeWrites are the hub's successful writes of the placed bundle's objects in the members
	// during the template changes, per change and member, by "resource verb"; ChangeRefused the
	// refused ones (409...), in all. ChangeHubWrites are the hub's writes to the hub cluster then.
	ChangeWrites    map[string]float64
	ChangeRefused   int
	ChangeHubWrites []servedWrite
	// QuietWrites are the hub's writes to the members after changes that need none;
	// QuietHubWrites its unplanned writes to the hub cluster then: a ClusterSetBinding's status
	// lists its members with their labels, so the label change rewrites it by design.
	QuietWrites, QuietHubWrites []servedWrite
	QuietChanges                []string
	// FleetBundles were created at once for the memory figure, all AllReady after AllReadyAfter.
	FleetBundles        int
	AllReadyAfter       time.Duration
	MemBefore, MemAfter costPoint
}

// measurePlacement runs last: the hub is stopped after the heal rounds (it is restarted here),
// and the FleetBundles place cfg.FleetBundles x members bundles that would change the cost, heal
// and steady-state figures of the other phases. It removes what it created all the same.
func (f *fleet) measurePlacement(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	if cfg.Placements < 1 {
		return nil
	}
	say("placement: restarting the hub, waiting until it has caught up with the fleet")
	if err := f.restartHub(ctx, cfg); err != nil {
		return err
	}
	pm := f.Members()
	pr := &res.Placement
	pr.Members = len(pm)
	if err := f.preparePlacement(ctx, pm); err != nil {
		return err
	}
	tr, err := trackConfigMaps(ctx, pm, placementNS, floorNS)
	if err != nil {
		return err
	}
	defer tr.stop()
	say("placement: %d template changes over %d members, hub and floor alternating", cfg.Placements, len(pm))
	if err := f.placementLatency(ctx, cfg, pm, tr, pr); err != nil {
		return err
	}
	say("placement: changes that need no write")
	if err := f.quietChanges(ctx, pm, pr); err != nil {
		return err
	}
	say("placement: memory of %d FleetBundles over %d members", cfg.FleetBundles, len(pm))
	if err := f.placementMemory(ctx, cfg, pm, pr); err != nil {
		return err
	}
	say("placement: removing the FleetBundles and the floor's bundles")
	return f.cleanupPlacement(ctx, pm)
}

// preparePlacement labels the members' MemberClusters and creates the namespaces: on the hub
// (with the ClusterSet global bound into it: a FleetBundle places only into the members of the
// sets bound to its namespace), and in every member (without spec.createNamespace the hub creates none: NamespaceMissing).
func (f *fleet) preparePlacement(ctx context.Context, pm []*member) error {
	if err := f.BindGlobal(ctx, placementNS); err != nil {
		return err
	}
	for _, m := range pm {
		for _, ns := range []string{placementNS, floorNS} {
			if err := fixture.EnsureNamespace(ctx, m.Client, ns); err != nil {
				return err
			}
		}
		if err := f.labelMember(ctx, m.Name, placementLabel, "true"); err != nil {
			return err
		}
	}
	return f.labelRegions(ctx, pm, false)
}

// labelMember sets (or, with value "", removes) a label of a MemberCluster.
func (f *fleet) labelMember(ctx context.Context, name, key, value string) error {
	return f.LabelMember(ctx, name, map[string]string{key: value})
}

// newFleetBundle selects every member of the benchmark.
func newFleetBundle(name, message string) *hubv1alpha1.FleetBundle {
	fb := fixture.NewFleetBundle(placementNS, name, map[string]string{placementLabel: "true"}, configbundlev1alpha1.ConfigBundleSpec{Message: message})
	fb.Spec.Template.Metadata.Labels = map[string]string{"bench": "placement"}
	return fb
}

// placementLatency times the first placement and cfg.Placements template changes, each followed
// by the floor's same change and the templated FleetBundle's, and counts the hub's writes
// meanwhile.
func (f *fleet) placementLatency(ctx context.Context, cfg benchConfig, pm []*member, tr *cmTracker, pr *placementResults) error {
	var err error
	if pr.HubCreate, err = f.hubPlace(ctx, pm, tr, placed{}, "hub-create", true); err != nil {
		return fmt.Errorf("placing the FleetBundle: %w", err)
	}
	if pr.FloorCreate, err = floorPlace(ctx, pm, tr, "floor-create", true); err != nil {
		return fmt.Errorf("the floor's first placement: %w", err)
	}
	if pr.TemplatedCreate, err = f.hubPlace(ctx, pm, tr, placed{templated: true}, "templated-create", true); err != nil {
		return fmt.Errorf("placing the templated FleetBundle: %w", err)
	}
	if err := f.waitFleetBundlesReady(ctx, placementName, 1, len(pm)); err != nil {
		return err
	}
	if err := f.waitFleetBundlesReady(ctx, templatedName, 1, len(pm)); err != nil {
		return err
	}
	if pr.SourcedCreate, err = f.sourcePlace(ctx, pm, tr, "source-create", true); err != nil {
		return fmt.Errorf("placing the sourced FleetBundle: %w", err)
	}
	if err := f.waitFleetBundlesReady(ctx, sourcedName, 1, len(pm)); err != nil {
		return err
	}
	from := time.Now()
	for i := range cfg.Placements {
		d, err := f.hubPlace(ctx, pm, tr, placed{}, fmt.Sprintf("hub-%d", i), false)
		if err := countChange(ctx, &pr.Hub, &pr.HubErrors, d, err); err != nil {
			return err
		}
		d, err = floorPlace(ctx, pm, tr, fmt.Sprintf("floor-%d", i), false)
		if err := countChange(ctx, &pr.Floor, &pr.FloorErrors, d, err); err != nil {
			return err
		}
		d, err = f.hubPlace(ctx, pm, tr, placed{templated: true}, fmt.Sprintf("templated-%d", i), false)
		if err := countChange(ctx, &pr.Templated, &pr.TemplatedErrors, d, err); err != nil {
			return err
		}
		// The source changes on a hub done with the templated change (as the template changes
		// follow the floor's), and the next change on one done with it.
		if err := f.waitFleetBundlesReady(ctx, templatedName, 1, len(pm)); err != nil {
			return err
		}
		d, err = f.sourcePlace(ctx, pm, tr, fmt.Sprintf("source-%d", i), false)
		if err := countChange(ctx, &pr.Sourced, &pr.SourcedErrors, d, err); err != nil {
			return err
		}
		if err := f.waitFleetBundlesReady(ctx, sourcedName, 1, len(pm)); err != nil {
			return err
		}
	}
	pr.CachedConfigMaps = f.cachedConfigMaps()
	pr.CachedSecrets = f.cachedSecrets()
	if err := sleepCtx(ctx, placementSettle); err != nil {
		return err
	}
	return f.countChangeWrites(ctx, from, time.Now(), cfg.Placements*len(pm), pr)
}

// countChange adds a change's latency, or counts it as an error unless the context is done.
func countChange(ctx context.Context, l *latencies, errs *int, d time.Duration, err error) error {
	switch {
	case err == nil:
		*l = append(*l, d)
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		*errs++
	}
	return nil
}

// floorPlace is the floor: it writes the ConfigBundle to every member in parallel (a create, or
// one merge patch of its message: no read first), and returns the time from its start to the
// ConfigMap with message seen in every member.
func floorPlace(ctx context.Context, pm []*member, tr *cmTracker, message string, create bool) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, len(pm))
	var wg sync.WaitGroup
	for i, m := range pm {
		wg.Go(func() {
			b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: placementName, Namespace: floorNS}}
			if create {
				b.Labels = map[string]string{"bench": "placement"}
				b.Spec.Message = message
				errs[i] = m.Client.Create(ctx, b)
				return
			}
			patch := fmt.Sprintf(`{"spec":{"message":%q}}`, message)
			errs[i] = m.Client.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(patch)))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	last, err := tr.waitAll(ctx, pm, floorNS, placementName, message)
	return max(0, last.Sub(start)), err
}

// quietChanges makes changes that need no write in any member: a label-only change of the
// FleetBundle, an update that changes nothing, its selector rewritten to select the same members,
// and a label no selector uses on every member; and collects the hub's writes after them.
func (f *fleet) quietChanges(ctx context.Context, pm []*member, pr *placementResults) error {
	from := time.Now()
	key := client.ObjectKey{Namespace: placementNS, Name: placementName}
	patches := []struct{ what, patch string }{
		{"FleetBundle label added", `{"metadata":{"labels":{"bench-touched":"true"}}}`},
		{"selector rewritten, same members", fmt.Sprintf(`{"spec":{"clusterSelector":{"matchLabels":null,"matchExpressions":[{"key":%q,"operator":"In","values":["true"]}]}}}`, placementLabel)},
	}
	for _, p := range patches {
		fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
		if err := f.Hub.Patch(ctx, fb, client.RawPatch(types.MergePatchType, []byte(p.patch))); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		pr.QuietChanges = append(pr.QuietChanges, p.what)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the status controller writes too
		fb := &hubv1alpha1.FleetBundle{}
		if err := f.Hub.Get(ctx, key, fb); err != nil {
			return err
		}
		return f.Hub.Update(ctx, fb)
	})
	if err != nil {
		return fmt.Errorf("no-op update: %w", err)
	}
	pr.QuietChanges = append(pr.QuietChanges, "no-op update")
	for _, m := range pm {
		if err := f.labelMember(ctx, m.Name, "bench-unused", "true"); err != nil {
			return err
		}
	}
	pr.QuietChanges = append(pr.QuietChanges, "MemberCluster label no selector uses")
	if err := sleepCtx(ctx, placementSettle); err != nil {
		return err
	}
	to := time.Now()
	if err := sleepCtx(ctx, auditGrace); err != nil {
		return err
	}
	all, err := f.servedWrites()
	if err != nil {
		return err
	}
	for _, w := range hubWritesIn(all, from, to) {
		switch {
		case w.Plane != hubPlane:
			pr.QuietWrites = append(pr.QuietWrites, w)
		case !w.planned() && !w.bindingMembers():
			pr.QuietHubWrites = append(pr.QuietHubWrites, w)
		}
	}
	return nil
}

// placementMemory samples the hub's memory before and after cfg.FleetBundles FleetBundles, each
// placed in every member, are all AllReady.
func (f *fleet) placementMemory(ctx context.Context, cfg benchConfig, pm []*member, pr *placementResults) error {
	var err error
	if pr.MemBefore, err = f.cost(ctx, len(f.Members()), len(pm), 0); err != nil {
		return err
	}
	start := time.Now()
	err = parallel(ctx, cfg.FleetBundles, 8, func(ctx context.Context, i int) error {
		return f.Hub.Create(ctx, newFleetBundle(fmt.Sprintf("mem-%04d", i), fmt.Sprintf("memory %d", i)))
	})
	if err != nil {
		return fmt.Errorf("creating FleetBundles: %w", err)
	}
	if err := f.waitFleetBundlesReady(ctx, "mem-", cfg.FleetBundles, len(pm)); err != nil {
		return err
	}
	pr.AllReadyAfter = time.Since(start)
	pr.FleetBundles = cfg.FleetBundles
	pr.MemAfter, err = f.cost(ctx, len(f.Members()), (cfg.FleetBundles+2)*len(pm), 0)
	return err
}

// waitFleetBundlesReady waits until n FleetBundles whose name starts with prefix are Ready
// (AllReady) for their generation, each with every one of selected members ready.
func (f *fleet) waitFleetBundlesReady(ctx context.Context, prefix string, n, selected int) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		list := &hubv1alpha1.FleetBundleList{}
		if err := f.Hub.List(ctx, list, client.InNamespace(placementNS)); err != nil {
			return false, nil
		}
		ready := 0
		for _, fb := range list.Items {
			st := fb.Status
			if strings.HasPrefix(fb.Name, prefix) && st.ObservedGeneration == fb.Generation && int(st.Clusters.Ready) == selected &&
				meta.IsStatusConditionTrue(st.Conditions, hubv1alpha1.ReadyCondition) {
				ready++
			}
		}
		return ready == n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d FleetBundles %s* to be AllReady in %d members: %w", n, prefix, selected, err)
	}
	return nil
}

// cleanupPlacement deletes the FleetBundles (and waits until the hub has removed their bundles
// and they are gone), the floor's bundles and the members' placement labels.
func (f *fleet) cleanupPlacement(ctx context.Context, pm []*member) error {
	if err := f.Hub.DeleteAllOf(ctx, &hubv1alpha1.FleetBundle{}, client.InNamespace(placementNS)); err != nil {
		return err
	}
	if err := client.IgnoreNotFound(f.Hub.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: placementNS, Name: sourcedName}})); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		list := &hubv1alpha1.FleetBundleList{}
		return f.Hub.List(ctx, list, client.InNamespace(placementNS)) == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the FleetBundles to be deleted: %w", err)
	}
	for _, m := range pm {
		if err := m.Client.DeleteAllOf(ctx, &configbundlev1alpha1.ConfigBundle{}, client.InNamespace(floorNS)); err != nil {
			return err
		}
		for _, l := range []string{placementLabel, "bench-unused", regionLabel} {
			if err := f.labelMember(ctx, m.Name, l, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// cmTracker records, for every member, when each message of each ConfigMap of some namespaces
// was first seen on a watch.
type cmTracker struct {
	mu      sync.Mutex
	seen    map[string]time.Time // member/namespace/name=message -> first seen
	changed chan struct{}        // closed, and replaced, on every new entry
	stops   []func()
}

func seenKey(member, ns, name, message string) string {
	return member + "/" + ns + "/" + name + "=" + message
}

// trackConfigMaps watches the ConfigMaps of the namespaces in every member from now on.
func trackConfigMaps(ctx context.Context, pm []*member, namespaces ...string) (*cmTracker, error) {
	t := &cmTracker{seen: map[string]time.Time{}, changed: make(chan struct{})}
	for _, m := range pm {
		for _, ns := range namespaces {
			list := &corev1.ConfigMapList{}
			if err := m.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				t.stop()
				return nil, err
			}
			w, err := m.Client.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				t.stop()
				return nil, err
			}
			t.stops = append(t.stops, w.Stop)
			go t.consume(m.Name, w)
		}
	}
	return t, nil
}

func (t *cmTracker) consume(member string, w watch.Interface) {
	for ev := range w.ResultChan() {
		at := time.Now()
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		key := seenKey(member, cm.Namespace, cm.Name, trackedValue(cm))
		t.mu.Lock()
		if _, ok := t.seen[key]; !ok {
			t.seen[key] = at
			close(t.changed)
			t.changed = make(chan struct{})
		}
		t.mu.Unlock()
	}
}

func (t *cmTracker) stop() {
	for _, stop := range t.stops {
		stop()
	}
}

// waitAll waits until the ConfigMap ns/name with message has been seen in every member, and
// returns when it was seen last.
func (t *cmTracker) waitAll(ctx context.Context, pm []*member, ns, name, message string) (time.Time, error) {
	return t.waitEach(ctx, pm, ns, name, func(*member) string { return message })
}

// waitEach waits until the ConfigMap ns/name with message(m) has been seen in every member m, and
// returns when it was seen last.
func (t *cmTracker) waitEach(ctx context.Context, pm []*member, ns, name string, message func(*member) string) (time.Time, error) {
	timeout := time.After(placementTimeout)
	for {
		var last time.Time
		missing, want := "", ""
		t.mu.Lock()
		for _, m := range pm {
			at, ok := t.seen[seenKey(m.Name, ns, name, message(m))]
			switch {
			case !ok:
				missing, want = m.Name, message(m)
			case at.After(last):
				last = at
			}
		}
		changed := t.changed
		t.mu.Unlock()
		if missing == "" {
			return last, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return time.Time{}, fmt.Errorf("ConfigMap %s/%s with message %q not seen in %s within %s", ns, name, want, missing, placementTimeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
