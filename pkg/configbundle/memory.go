package configbundle

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"configbundle.dev/hub/api/configbundle/v1alpha1"
)

// recentStatusWindow is how long a written status is trusted over a cache that has not caught up.
const recentStatusWindow = 5 * time.Second

// memory is what the reconciler remembers of the bundles of the member clusters it is engaged
// with, between reconciles. It backs up durable facts, never replaces them: losing an entry
// costs one needless reconcile, one status write that conflicts, one heal-latency sample, or the
// fallback of specLeftPublished for a ConfigMap its status could not record. Of each bundle it
// remembers:
//
//   - ownWrite: the resourceVersion of the reconciler's last write of the bundle's ConfigMap, so
//     that the watch event of that very write does not wake the bundle, and so that the
//     ConfigMap is known as the hub's own even if its status could not record it. Kept while the
//     bundle exists.
//   - status: the last status the reconciler wrote, trusted for recentStatusWindow over a cache
//     that has not caught up with it. Dropped by the first look after the window.
//   - seenAt: when a change of the managed ConfigMap was first seen, the start of the heal
//     latency. Dropped by the reconcile that follows.
//
// A bundle's entry is dropped when the bundle is gone (forgetBundle), every entry of a member
// when the reconciler's engagement with that member ends (forgetCluster). Notes about a member
// the reconciler is not engaged with are dropped, so that a reconcile still running when its
// member leaves leaves nothing behind.
//
// memory is safe for concurrent use. mu guards members and everything under it; it is held for
// map operations only, never across a call that leaves the process.
type memory struct {
	mu      sync.Mutex
	members map[multicluster.ClusterName]*engagement
}

// engagement is what is remembered during one engagement with a member cluster. A member that
// is engaged again gets a new one, so that the end of its previous engagement forgets nothing of
// the new.
type engagement struct {
	bundles map[types.NamespacedName]*bundleMemory
}

// bundleMemory is what is remembered of one bundle; see memory.
type bundleMemory struct {
	ownWrite string
	status   *writtenStatus
	seenAt   time.Time // zero: no change seen
}

// writtenStatus is a status the reconciler wrote, and when.
type writtenStatus struct {
	uid    types.UID
	status v1alpha1.ConfigBundleStatus
	at     time.Time
}

// engage starts remembering the bundles of member name, afresh, and returns the engagement to
// pass to forgetCluster when it ends.
func (m *memory) engage(name multicluster.ClusterName) *engagement {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.members == nil {
		m.members = map[multicluster.ClusterName]*engagement{}
	}
	e := &engagement{bundles: map[types.NamespacedName]*bundleMemory{}}
	m.members[name] = e
	return e
}

// forgetCluster forgets every bundle of member name, unless the member has been engaged again
// since e began.
func (m *memory) forgetCluster(name multicluster.ClusterName, e *engagement) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.members[name] == e {
		delete(m.members, name)
	}
}

// forgetBundle forgets everything about the bundle of req.
func (m *memory) forgetBundle(req mcreconcile.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.members[req.ClusterName]; e != nil {
		delete(e.bundles, req.NamespacedName)
	}
}

// noteWrite remembers the resourceVersion of the reconciler's write of the ConfigMap of req.
func (m *memory) noteWrite(req mcreconcile.Request, resourceVersion string) {
	m.update(req, func(b *bundleMemory) { b.ownWrite = resourceVersion })
}

// isOwnWrite reports whether resourceVersion is that of the reconciler's last write of the
// ConfigMap of req.
func (m *memory) isOwnWrite(req mcreconcile.Request, resourceVersion string) bool {
	own := false
	m.update(req, func(b *bundleMemory) { own = b.ownWrite != "" && b.ownWrite == resourceVersion })
	return own
}

// noteStatus remembers status as just written for the bundle of req, whose uid is uid.
func (m *memory) noteStatus(req mcreconcile.Request, uid types.UID, status v1alpha1.ConfigBundleStatus) {
	m.update(req, func(b *bundleMemory) { b.status = &writtenStatus{uid: uid, status: status, at: time.Now()} })
}

// recentStatus returns the status written for the bundle of req (uid: the bundle's uid) less
// than recentStatusWindow ago, or nil. An older status, or one of an earlier bundle of the same
// name, is forgotten: memory is for moments, not for every bundle.
func (m *memory) recentStatus(req mcreconcile.Request, uid types.UID) *v1alpha1.ConfigBundleStatus {
	var recent *v1alpha1.ConfigBundleStatus
	m.update(req, func(b *bundleMemory) {
		if w := b.status; w != nil && w.uid == uid && time.Since(w.at) < recentStatusWindow {
			recent = &w.status
		} else {
			b.status = nil
		}
	})
	return recent
}

// seen notes that a change of the ConfigMap of req was seen now, unless one seen earlier is
// still waiting for its reconcile.
func (m *memory) seen(req mcreconcile.Request) {
	m.update(req, func(b *bundleMemory) {
		if b.seenAt.IsZero() {
			b.seenAt = time.Now()
		}
	})
}

// take returns and forgets when a change of the ConfigMap of req was first seen.
func (m *memory) take(req mcreconcile.Request) (seenAt time.Time, ok bool) {
	m.update(req, func(b *bundleMemory) { seenAt, b.seenAt = b.seenAt, time.Time{} })
	return seenAt, !seenAt.IsZero()
}

// update runs f on the entry of req's bundle, a new one if it has none, and drops the entry if
// f leaves it empty. Nothing is remembered about a member the reconciler is not engaged with.
func (m *memory) update(req mcreconcile.Request, f func(*bundleMemory)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.members[req.ClusterName]
	if e == nil {
		f(&bundleMemory{})
		return
	}
	b := e.bundles[req.NamespacedName]
	if b == nil {
		b = &bundleMemory{}
	}
	f(b)
	if b.empty() {
		delete(e.bundles, req.NamespacedName)
		return
	}
	e.bundles[req.NamespacedName] = b
}

func (b *bundleMemory) empty() bool {
	return b.ownWrite == "" && b.status == nil && b.seenAt.IsZero()
}

// size returns the number of bundles remembered of member name.
func (m *memory) size(name multicluster.ClusterName) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.members[name]; e != nil {
		return len(e.bundles)
	}
	return 0
}
