package placement

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestLedgerHeals: whether a bundle found gone is a heal, after what the ledger saw. A heal is
// counted only when the hub placed the bundle in that very cluster for that very FleetBundle and
// did not remove it itself.
func TestLedgerHeals(t *testing.T) {
	p := pair{member: "m4", fb: types.NamespacedName{Namespace: "default", Name: "web"}}
	inA := placement{cluster: "uid-a", fleetBundle: "fb-1"}
	for _, tc := range []struct {
		name  string
		steps func(*ledger)
		find  placement // where and for what the bundle is found gone
		heal  bool
	}{
		{name: "never placed", find: inA},
		{name: "placed, then gone: someone deleted it", steps: func(l *ledger) { l.setPlaced(p, inA) }, find: inA, heal: true},
		{name: "the name moved to another cluster (register --force)", steps: func(l *ledger) { l.setPlaced(p, inA) },
			find: placement{cluster: "uid-b", fleetBundle: "fb-1"}},
		{name: "moved away and back: the last placement is elsewhere", steps: func(l *ledger) {
			l.setPlaced(p, inA)
			l.setPlaced(p, placement{cluster: "uid-b", fleetBundle: "fb-1"})
		}, find: inA},
		{name: "the FleetBundle was recreated (another uid)", steps: func(l *ledger) { l.setPlaced(p, inA) },
			find: placement{cluster: "uid-a", fleetBundle: "fb-2"}},
		{name: "the hub removed it (selected out)", steps: func(l *ledger) {
			l.setPlaced(p, inA)
			l.forget(p, "bundle-1")
		}, find: inA},
		{name: "removed, placed again, then deleted by someone", steps: func(l *ledger) {
			l.setPlaced(p, inA)
			l.forget(p, "bundle-1")
			l.setPlaced(p, inA)
		}, find: inA, heal: true},
		{name: "its FleetBundle is gone", steps: func(l *ledger) {
			l.setPlaced(p, inA)
			l.forgetFleetBundle(p.fb, "fb-1")
		}, find: inA},
		{name: "another member's placement", steps: func(l *ledger) { l.setPlaced(pair{member: "m5", fb: p.fb}, inA) }, find: inA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			if tc.steps != nil {
				tc.steps(l)
			}
			if got := l.wasPlaced(p, tc.find); got != tc.heal {
				t.Errorf("wasPlaced = %v, want %v", got, tc.heal)
			}
		})
	}
}

// TestLedgerRemoved: a bundle the hub removed is known as its own garbage until the hub places
// the pair's bundle again, or its FleetBundle goes.
func TestLedgerRemoved(t *testing.T) {
	p := pair{member: "m1", fb: types.NamespacedName{Namespace: "default", Name: "web"}}
	inA := placement{cluster: "uid-a", fleetBundle: "fb-1"}
	for _, tc := range []struct {
		name    string
		steps   func(*ledger)
		bundle  types.UID
		removed bool
	}{
		{name: "nothing removed", steps: func(l *ledger) { l.setPlaced(p, inA) }, bundle: "bundle-1"},
		{name: "the bundle the hub removed", steps: func(l *ledger) { l.forget(p, "bundle-1") }, bundle: "bundle-1", removed: true},
		{name: "another bundle of the name", steps: func(l *ledger) { l.forget(p, "bundle-1") }, bundle: "bundle-2"},
		{name: "the last of two removed", steps: func(l *ledger) {
			l.forget(p, "bundle-1")
			l.forget(p, "bundle-2")
		}, bundle: "bundle-2", removed: true},
		{name: "placed again since", steps: func(l *ledger) {
			l.forget(p, "bundle-1")
			l.setPlaced(p, inA)
		}, bundle: "bundle-1"},
		{name: "its FleetBundle is gone", steps: func(l *ledger) {
			l.forget(p, "bundle-1")
			l.forgetFleetBundle(p.fb, "fb-1")
		}, bundle: "bundle-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			tc.steps(l)
			if got := l.wasRemoved(p, tc.bundle); got != tc.removed {
				t.Errorf("wasRemoved(%s) = %v, want %v", tc.bundle, got, tc.removed)
			}
		})
	}
}
