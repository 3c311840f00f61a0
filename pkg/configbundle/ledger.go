package configbundle

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// recentStatusWindow is how long a written status is trusted over a cache that has not caught up.
const recentStatusWindow = 5 * time.Second

// ledger is what the reconciler records of the bundles of the member clusters it is engaged
// with, between reconciles: its own writes, so that it tells a heal from them, and what it must
// still report or read afresh. It backs up durable facts, never replaces them: losing an entry
// (a restart of the hub) costs one needless reconcile, one status write that conflicts, one
// heal-latency sample, a live read, the fallback of specLeftPublished for a ConfigMap its status
// could not record, a fight reported late, an outcome no longer reported (until the next
// reconcile), or a heal that status.heals misses because its status could not be written before
// the restart. Of each bundle it remembers:
//
//   - uid: the bundle's, once a reconcile has read it. What was remembered of an earlier bundle
//     of the same name is forgotten when a reconcile finds a new uid.
//   - ownWrite: the resourceVersion of the reconciler's last write of the bundle's ConfigMap, so
//     that the watch event of that very write does not wake the bundle, and so that the
//     ConfigMap is known as the hub's own even if its status (or the cached copy of the bundle,
//     which lags the hub's own status writes) does not record it: a ConfigMap at that
//     resourceVersion was not changed by others. Kept while the bundle exists.
//   - unrecorded: heals made but not yet counted in a written status, and when the first and
//     the last were made; the next status written adds them, so that status.heals agrees with
//     the heals logged, recorded as Events and counted in the metric, even when a status write
//     fails, and while a status that would only count heals waits (Options.HealStatusDelay).
//   - fight: the times of the last FightHeals heals and what they healed, to report a fight
//     once. Kept while the bundle exists.
//   - unreported: the Ready condition the bundle's status should show, when the last status
//     could not be written (Reconciler.Unreported). Dropped by the next status written, or not
//     needed.
//   - status: the last status the reconciler wrote, trusted for recentStatusWindow over a cache
//     that has not caught up with it. Dropped by the first look after the window.
//   - verifyLive: the next reconcile must read the bundle and its ConfigMap from the API server,
//     not from the cache, which has not caught up with them (a resync after an outage). Kept
//     until a reconcile that read them succeeds.
//   - liveBundle: the bundle's resourceVersion as a live read found it (or as the reconciler's
//     own write of the bundle left it since), while the cache may not have caught up: a
//     reconcile that finds another resourceVersion in the cache reads the bundle live again, so
//     that a stale cached bundle never undoes what was done on the live one. Dropped once the
//     cache holds it.
//   - seenAt: when a change of the managed ConfigMap was first seen, the start of the heal
//     latency. Dropped by the reconcile that follows.
//
// A bundle's entry is dropped when the bundle is gone (forgetBundle), every entry of a member
// when the reconciler's engagement with that member ends (forgetCluster). Notes about a member
// the reconciler is not engaged with are dropped, so that a reconcile still running when its
// member leaves leaves nothing behind.
//
// ledger is safe for concurrent use. mu guards members and everything under it; it is held for
// map operations only, never across a call that leaves the process.
type ledger struct {
	mu      sync.Mutex
	members map[multicluster.ClusterName]*engagement
}

// engagement is what is remembered during one engagement with a member cluster. A member that
// is engaged again gets a new one, so that the end of its previous engagement forgets nothing of
// the new. Besides the bundles' entries, it holds the bundles the member held when it connected
// (total of them) that no reconcile has recorded the outcome of since (unsynced): the member's
// first full reconcile (Reconciler.Sync), whose count left the metric
// configbundle_member_unsynced_bundles follows.
type engagement struct {
	bundles  map[types.NamespacedName]*bundleEntry
	unsynced map[types.NamespacedName]struct{}
	total    int
}

// bundleEntry is what is remembered of one bundle; see ledger.
type bundleEntry struct {
	uid        types.UID
	ownWrite   string
	unrecorded unrecordedHeals
	fight      fight
	unreported *metav1.Condition
	status     *writtenStatus
	verifyLive bool
	liveBundle string
	seenAt     time.Time // zero: no change seen
}

// unrecordedHeals are heals not yet counted in a written status.
type unrecordedHeals struct {
	count       int64
	first, last time.Time // when the first and the last of them were made
}

// writtenStatus is a status the reconciler wrote, and when.
type writtenStatus struct {
	uid    types.UID
	status configbundlev1alpha1.ConfigBundleStatus
	at     time.Time
}

// engage starts remembering the bundles of member name, afresh, with the bundles it holds as it
// connects still to be reconciled once (unsynced), and returns the engagement to pass to
// forgetCluster when it ends.
func (m *ledger) engage(name multicluster.ClusterName, unsynced map[types.NamespacedName]struct{}) *engagement {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.members == nil {
		m.members = map[multicluster.ClusterName]*engagement{}
	}
	e := &engagement{bundles: map[types.NamespacedName]*bundleEntry{}, unsynced: unsynced, total: len(unsynced)}
	m.members[name] = e
	memberUnsynced.WithLabelValues(string(name)).Set(float64(len(unsynced)))
	return e
}

// noteRecorded notes that a reconcile recorded the outcome of the bundle of req.
func (m *ledger) noteRecorded(req mcreconcile.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.members[req.ClusterName]
	if e == nil {
		return
	}
	if _, ok := e.unsynced[req.NamespacedName]; ok {
		delete(e.unsynced, req.NamespacedName)
		memberUnsynced.WithLabelValues(string(req.ClusterName)).Set(float64(len(e.unsynced)))
	}
}

// sync says how far the first full reconcile of member name since it connected has got.
func (m *ledger) sync(name multicluster.ClusterName) Sync {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.members[name]
	if e == nil {
		return Sync{}
	}
	return Sync{Connected: true, Total: e.total, Left: len(e.unsynced)}
}

// forgetCluster forgets every bundle of member name, unless the member has been engaged again
// since e began.
func (m *ledger) forgetCluster(name multicluster.ClusterName, e *engagement) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.members[name] == e {
		delete(m.members, name)
		memberUnsynced.DeleteLabelValues(string(name))
	}
}

// forgetBundle forgets everything about the bundle of req.
func (m *ledger) forgetBundle(req mcreconcile.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.members[req.ClusterName]; e != nil {
		delete(e.bundles, req.NamespacedName)
	}
}

// observe notes that the bundle of req has uid uid, and forgets what was remembered of an
// earlier bundle of the same name (but not the change seen, which woke this one).
func (m *ledger) observe(req mcreconcile.Request, uid types.UID) {
	m.update(req, func(b *bundleEntry) {
		if b.uid != "" && b.uid != uid {
			*b = bundleEntry{seenAt: b.seenAt}
		}
		b.uid = uid
	})
}

// noteWrite remembers the resourceVersion of the reconciler's write of the ConfigMap of req.
func (m *ledger) noteWrite(req mcreconcile.Request, resourceVersion string) {
	m.update(req, func(b *bundleEntry) { b.ownWrite = resourceVersion })
}

// isOwnWrite reports whether resourceVersion is that of the reconciler's last write of the
// ConfigMap of req.
func (m *ledger) isOwnWrite(req mcreconcile.Request, resourceVersion string) bool {
	own := false
	m.update(req, func(b *bundleEntry) { own = b.ownWrite != "" && b.ownWrite == resourceVersion })
	return own
}

// lagsOwnWrite reports whether resourceVersion, that of a cached ConfigMap of req, is not the
// reconciler's last write of it: the cache has not caught up with that write yet (or someone
// wrote the ConfigMap since).
func (m *ledger) lagsOwnWrite(req mcreconcile.Request, resourceVersion string) bool {
	lags := false
	m.update(req, func(b *bundleEntry) { lags = b.ownWrite != "" && b.ownWrite != resourceVersion })
	return lags
}

// wrote reports whether the reconciler remembers writing a ConfigMap for the bundle of req.
func (m *ledger) wrote(req mcreconcile.Request) bool {
	wrote := false
	m.update(req, func(b *bundleEntry) { wrote = b.ownWrite != "" })
	return wrote
}

// noteHeal remembers a heal of drift in the ConfigMap of req, made at, until a status counts it.
// It returns the report of the fight this heal makes if it is not reported yet, nil otherwise.
func (m *ledger) noteHeal(req mcreconcile.Request, at time.Time, drift []string) *fightReport {
	var fighting *fightReport
	m.update(req, func(b *bundleEntry) {
		first := b.unrecorded.first
		if b.unrecorded.count == 0 {
			first = at
		}
		b.unrecorded = unrecordedHeals{count: b.unrecorded.count + 1, first: first, last: at}
		fighting = b.fight.heal(at, drift)
	})
	return fighting
}

// unrecordedHeals returns the heals of the ConfigMap of req that no written status counts yet.
func (m *ledger) unrecordedHeals(req mcreconcile.Request) unrecordedHeals {
	var u unrecordedHeals
	m.update(req, func(b *bundleEntry) { u = b.unrecorded })
	return u
}

// noteHealsRecorded notes that a written status counts n of the unrecorded heals of req.
func (m *ledger) noteHealsRecorded(req mcreconcile.Request, n int64) {
	m.update(req, func(b *bundleEntry) {
		if b.unrecorded.count -= n; b.unrecorded.count <= 0 {
			b.unrecorded = unrecordedHeals{}
		} else {
			b.unrecorded.first = b.unrecorded.last // heals made while the status was written
		}
	})
}

// noteUnreported remembers the Ready condition the status of the bundle of req could not show;
// nil forgets it.
func (m *ledger) noteUnreported(req mcreconcile.Request, ready *metav1.Condition) {
	m.update(req, func(b *bundleEntry) { b.unreported = ready })
}

// unreported returns the Ready conditions the statuses of member name's bundles could not show.
func (m *ledger) unreported(name multicluster.ClusterName) map[types.NamespacedName]metav1.Condition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[types.NamespacedName]metav1.Condition{}
	if e := m.members[name]; e != nil {
		for key, b := range e.bundles {
			if b.unreported != nil {
				out[key] = *b.unreported
			}
		}
	}
	return out
}

// noteStatus remembers status as just written for the bundle of req, whose uid is uid.
func (m *ledger) noteStatus(req mcreconcile.Request, uid types.UID, status configbundlev1alpha1.ConfigBundleStatus) {
	m.update(req, func(b *bundleEntry) { b.status = &writtenStatus{uid: uid, status: status, at: time.Now()} })
}

// recentStatus returns the status written for the bundle of req (uid: the bundle's uid) less
// than recentStatusWindow ago, or nil. An older status, or one of an earlier bundle of the same
// name, is forgotten: the ledger is for moments, not for every bundle.
func (m *ledger) recentStatus(req mcreconcile.Request, uid types.UID) *configbundlev1alpha1.ConfigBundleStatus {
	var recent *configbundlev1alpha1.ConfigBundleStatus
	m.update(req, func(b *bundleEntry) {
		if w := b.status; w != nil && w.uid == uid && time.Since(w.at) < recentStatusWindow {
			recent = &w.status
		} else {
			b.status = nil
		}
	})
	return recent
}

// noteVerifyLive notes that the next reconcile of req must read live.
func (m *ledger) noteVerifyLive(req mcreconcile.Request) {
	m.update(req, func(b *bundleEntry) { b.verifyLive = true })
}

// takeVerifyLive returns and forgets whether the next reconcile of req must read live.
func (m *ledger) takeVerifyLive(req mcreconcile.Request) bool {
	live := false
	m.update(req, func(b *bundleEntry) { live, b.verifyLive = b.verifyLive, false })
	return live
}

// noteLiveRead notes the resourceVersion of the bundle of req as read from the API server.
func (m *ledger) noteLiveRead(req mcreconcile.Request, resourceVersion string) {
	m.update(req, func(b *bundleEntry) { b.liveBundle = resourceVersion })
}

// noteBundleWrite notes the resourceVersion of the bundle of req as the reconciler's write left it,
// if a live read is still waiting for the cache to catch up.
func (m *ledger) noteBundleWrite(req mcreconcile.Request, resourceVersion string) {
	m.update(req, func(b *bundleEntry) {
		if b.liveBundle != "" {
			b.liveBundle = resourceVersion
		}
	})
}

// cacheLagsBundle reports whether resourceVersion, that of the cached bundle of req, is not the
// one a live read (or a write since) last found; once the cache holds that one, the live read is
// forgotten.
func (m *ledger) cacheLagsBundle(req mcreconcile.Request, resourceVersion string) bool {
	lags := false
	m.update(req, func(b *bundleEntry) {
		if lags = b.liveBundle != "" && b.liveBundle != resourceVersion; !lags {
			b.liveBundle = ""
		}
	})
	return lags
}

// noteSeen notes that a change of the ConfigMap of req was seen now, unless one seen earlier is
// still waiting for its reconcile.
func (m *ledger) noteSeen(req mcreconcile.Request) {
	m.update(req, func(b *bundleEntry) {
		if b.seenAt.IsZero() {
			b.seenAt = time.Now()
		}
	})
}

// takeSeen returns and forgets when a change of the ConfigMap of req was first seen.
func (m *ledger) takeSeen(req mcreconcile.Request) (seenAt time.Time, ok bool) {
	m.update(req, func(b *bundleEntry) { seenAt, b.seenAt = b.seenAt, time.Time{} })
	return seenAt, !seenAt.IsZero()
}

// update runs f on the entry of req's bundle, a new one if it has none, and drops the entry if
// f leaves it empty. Nothing is remembered about a member the reconciler is not engaged with.
func (m *ledger) update(req mcreconcile.Request, f func(*bundleEntry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.members[req.ClusterName]
	if e == nil {
		f(&bundleEntry{})
		return
	}
	b := e.bundles[req.NamespacedName]
	if b == nil {
		b = &bundleEntry{}
	}
	f(b)
	if b.empty() {
		delete(e.bundles, req.NamespacedName)
		return
	}
	e.bundles[req.NamespacedName] = b
}

func (b *bundleEntry) empty() bool {
	return b.uid == "" && b.ownWrite == "" && b.unrecorded.count == 0 && len(b.fight.heals) == 0 &&
		b.unreported == nil && b.status == nil && !b.verifyLive && b.liveBundle == "" && b.seenAt.IsZero()
}

// size returns the number of bundles remembered of member name.
func (m *ledger) size(name multicluster.ClusterName) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.members[name]; e != nil {
		return len(e.bundles)
	}
	return 0
}
