package placement

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// pair is one (member, FleetBundle) pair: the unit of placement.
type pair struct {
	member string
	fb     types.NamespacedName
}

// Outcome is a pair's last placement failure that no object in the member records: a
// Conflict, a missing namespace, a refused write. The zero Outcome is none.
type Outcome struct {
	// Reason is one of hubv1alpha1.ConflictReason, NamespaceMissingReason, PlacementFailedReason,
	// RenderFailedReason, RevisionMissingReason.
	Reason string
	// Message says what happened, for a human.
	Message string
}

// ledger is what the placement controller records between reconciles and shares with the
// status controller: the bundles it placed, so that it tells a heal from its own write, and what
// the FleetBundles' status must still report. mu guards every field; it is never held across a
// call to an API server.
type ledger struct {
	mu sync.Mutex
	// outcomes are the pairs' failures (absent: none).
	outcomes map[pair]Outcome
	// placed holds where and for what the hub placed (or found in place) a pair's bundle, until
	// the hub removes it: a bundle that is gone although placed in that very cluster for that
	// very FleetBundle was deleted by someone, and recreating it is a heal. Lost when the hub
	// restarts.
	placed map[pair]placement
	// removed holds the uid of the pair's bundle the hub deleted last, until it places one
	// again: a bundle of that uid that a read still finds is the hub's own garbage (a cache
	// that has not seen the deletion, or a deletion held by a finalizer), never the hub's
	// placement.
	removed map[pair]types.UID
	// heals counts, per FleetBundle uid, the heals not yet written to its status.
	heals map[types.UID]int64
	// due holds when the hub first found that a pair's member must get the FleetBundle's bundle
	// or its new template, until the write that does it: the start of its placement latency.
	due map[pair]time.Time
	// held holds, per pair, the revision its member holds and since when: since the hub wrote
	// it, or since the hub first saw it there (after a restart). A rollout's progressDeadline
	// runs from then.
	held map[pair]heldRevisionSince
	// refused holds, per pair, the revision the member last refused (a write refused, its
	// namespace missing, a ConfigBundle of the name not the hub's), until a write of a revision
	// succeeds there: a refused updateRevision fails the rollout, and holds its halt, until the
	// member takes it.
	refused map[pair]int64
	// seenHeld holds, per pair, the revision its member was last seen holding (0: none), by the
	// status controller or in the hub's own write: what the member is taken to hold while it
	// cannot be seen.
	seenHeld map[pair]int64
	// assumedHeld holds, per pair whose member was not seen since the hub started (or since this
	// replica took it over), the FleetBundle's status.heldRevisions when the pair was first
	// met: the member may hold any of them.
	assumedHeld map[pair][]int64
	// restarted holds, per pair, the revision the hub last restarted each consumer of its
	// bundle for (by kind/name): a restart is not sent twice while the cache has not seen it.
	restarted map[pair]map[string]int64
}

// heldRevisionSince is a revision a member holds, and since when.
type heldRevisionSince struct {
	revision int64
	since    time.Time
}

// placement is what the hub placed for a pair.
type placement struct {
	// cluster identifies the member's cluster (its kube-system uid, spokeprovider.State's
	// ClusterID), so that a member name moved to another cluster (hub register --force) finds
	// nothing placed there.
	cluster string
	// fleetBundle is the uid of the FleetBundle it was placed for.
	fleetBundle types.UID
}

func newLedger() *ledger {
	return &ledger{outcomes: map[pair]Outcome{}, placed: map[pair]placement{}, removed: map[pair]types.UID{},
		heals: map[types.UID]int64{}, due: map[pair]time.Time{}, held: map[pair]heldRevisionSince{}, refused: map[pair]int64{},
		seenHeld: map[pair]int64{}, assumedHeld: map[pair][]int64{}, restarted: map[pair]map[string]int64{}}
}

// setOutcome records a pair's outcome and reports whether it changed.
func (m *ledger) setOutcome(p pair, o Outcome) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.outcomes[p] == o {
		return false
	}
	if o == (Outcome{}) {
		delete(m.outcomes, p)
	} else {
		m.outcomes[p] = o
	}
	return true
}

// outcome returns a pair's outcome.
func (m *ledger) outcome(p pair) Outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.outcomes[p]
}

// setPlaced remembers that the hub placed (or found in place) a pair's bundle in the cluster
// for the FleetBundle: what it removed before is no longer needed.
func (m *ledger) setPlaced(p pair, pl placement) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.placed[p] = pl
	delete(m.removed, p)
}

// wasPlaced reports whether the hub placed a pair's bundle in that cluster for that FleetBundle.
func (m *ledger) wasPlaced(p pair, pl placement) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	placed, ok := m.placed[p]
	return ok && placed == pl
}

// forget drops what is remembered of a pair: its bundle of uid bundle was removed by the hub.
func (m *ledger) forget(p pair, bundle types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.placed, p)
	delete(m.outcomes, p)
	delete(m.due, p)
	delete(m.held, p)
	delete(m.refused, p)
	delete(m.assumedHeld, p)
	delete(m.restarted, p)
	m.seenHeld[p] = 0
	m.removed[p] = bundle
}

// noteRefused records that a pair's member refused revision (0: none decided).
func (m *ledger) noteRefused(p pair, revision int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if revision != 0 {
		m.refused[p] = revision
	}
}

// refusedRevision returns the revision a pair's member last refused, 0 if none since its last
// write.
func (m *ledger) refusedRevision(p pair) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[p]
}

// noteWritten records that the hub wrote revision of a pair's bundle, at now.
func (m *ledger) noteWritten(p pair, revision int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[p] = heldRevisionSince{revision: revision, since: now}
	delete(m.refused, p)
	m.seenHeld[p] = revision
	delete(m.assumedHeld, p)
}

// heldSince returns since when a pair's member holds revision: since the hub wrote it, or, if
// the hub did not (it restarted since), since now, the first time it is asked.
func (m *ledger) heldSince(p pair, revision int64, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.held[p]; ok && h.revision == revision {
		return h.since
	}
	m.held[p] = heldRevisionSince{revision: revision, since: now}
	return now
}

// noteSeenHeld records that a pair's member was seen holding revision (0: none).
func (m *ledger) noteSeenHeld(p pair, revision int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seenHeld[p] = revision
	delete(m.assumedHeld, p)
}

// heldUnseen returns the revisions a pair's member, which cannot be seen, may hold: the one it
// was last seen holding; or, if it was not seen since the hub started, the revisions the
// FleetBundle's status recorded (recorded) when the pair was first met.
func (m *ledger) heldUnseen(p pair, recorded []int64) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.seenHeld[p]; ok {
		return []int64{n}
	}
	if assumed, ok := m.assumedHeld[p]; ok {
		return assumed
	}
	m.assumedHeld[p] = slices.Clone(recorded)
	return recorded
}

// wasRemoved reports whether the bundle of uid bundle is the pair's bundle the hub removed last.
func (m *ledger) wasRemoved(p pair, bundle types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	removed, ok := m.removed[p]
	return ok && removed == bundle
}

// notePlacementDue records that a pair's member must get a write of its bundle (now, unless it
// was already due).
func (m *ledger) notePlacementDue(p pair, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.due[p]; !ok {
		m.due[p] = now
	}
}

// takePlacementLatency returns how long ago a pair's placement became due and forgets it; false
// if it was not due.
func (m *ledger) takePlacementLatency(p pair, now time.Time) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.due[p]
	delete(m.due, p)
	return now.Sub(since), ok
}

// noteHeal counts one heal of the FleetBundle of uid.
func (m *ledger) noteHeal(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heals[uid]++
}

// pendingHeals returns the heals of the FleetBundle of uid not yet written to its status.
func (m *ledger) pendingHeals(uid types.UID) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heals[uid]
}

// noteHealsWritten takes n heals of the FleetBundle of uid off the pending ones: its status counts
// them now.
func (m *ledger) noteHealsWritten(uid types.UID, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heals[uid] -= n; m.heals[uid] <= 0 {
		delete(m.heals, uid)
	}
}

// forgetFleetBundle drops everything remembered of a FleetBundle that is gone.
func (m *ledger) forgetFleetBundle(fb types.NamespacedName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ofFleetBundle := func(p pair) bool { return p.fb == fb }
	deletePairs(m.outcomes, ofFleetBundle)
	deletePairs(m.placed, ofFleetBundle)
	deletePairs(m.due, ofFleetBundle)
	deletePairs(m.held, ofFleetBundle)
	deletePairs(m.refused, ofFleetBundle)
	deletePairs(m.removed, ofFleetBundle)
	deletePairs(m.seenHeld, ofFleetBundle)
	deletePairs(m.assumedHeld, ofFleetBundle)
	deletePairs(m.restarted, ofFleetBundle)
	delete(m.heals, uid)
}

// deletePairs deletes the entries of the pairs that match from a map kept by pair.
func deletePairs[V any](m map[pair]V, match func(pair) bool) {
	maps.DeleteFunc(m, func(p pair, _ V) bool { return match(p) })
}

// noteRestarted records that the hub restarted a consumer (kind/name) of a pair's bundle for
// revision.
func (m *ledger) noteRestarted(p pair, consumer string, revision int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.restarted[p] == nil {
		m.restarted[p] = map[string]int64{}
	}
	m.restarted[p][consumer] = revision
}

// wasRestarted reports whether the hub restarted a consumer (kind/name) of a pair's bundle for
// revision.
func (m *ledger) wasRestarted(p pair, consumer string, revision int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restarted[p][consumer] == revision
}
