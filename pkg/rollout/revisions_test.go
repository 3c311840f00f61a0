package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// mib is a mebibyte.
const mib = 1 << 20

// history is revisions 1..n, each of size bytes.
func history(n int64, size int) []Revision {
	revs := make([]Revision, 0, n)
	for i := int64(1); i <= n; i++ {
		revs = append(revs, Revision{Number: i, Name: RevisionName("web", i), Size: size})
	}
	return revs
}

func numbers(revs []Revision) []int64 {
	out := []int64{}
	for _, r := range revs {
		out = append(out, r.Number)
	}
	return out
}

// TestPrunable: revisions not in use go beyond revisionHistoryLimit (at most
// MaxRevisionHistoryLimit, whatever the spec says), then beyond MaxRevisionHistoryBytes of
// definitions, the oldest first; a revision in use (the status's current, update, failed and
// held revisions, or one a member is seen holding) never goes, whatever its size.
func TestPrunable(t *testing.T) {
	fb := func(limit *int32, current, update int64, mod ...func(*hubv1alpha1.FleetBundleStatus)) *hubv1alpha1.FleetBundle {
		f := &hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{RevisionHistoryLimit: limit},
			Status: hubv1alpha1.FleetBundleStatus{CurrentRevision: current, UpdateRevision: update}}
		for _, m := range mod {
			m(&f.Status)
		}
		return f
	}
	heldInStatus := func(n ...int64) func(*hubv1alpha1.FleetBundleStatus) {
		return func(st *hubv1alpha1.FleetBundleStatus) { st.HeldRevisions = n }
	}
	failed := func(n int64) func(*hubv1alpha1.FleetBundleStatus) {
		return func(st *hubv1alpha1.FleetBundleStatus) { st.Rollout = &hubv1alpha1.RolloutStatus{FailedRevision: n} }
	}
	for _, tc := range []struct {
		name string
		fb   *hubv1alpha1.FleetBundle
		revs []Revision
		held map[int64]bool
		want []int64
	}{
		{name: "within the default limit", fb: fb(nil, 11, 11), revs: history(11, 100), want: []int64{}},
		{name: "beyond the default limit", fb: fb(nil, 12, 12), revs: history(12, 100), want: []int64{1}},
		{name: "limit 0 keeps those in use", fb: fb(ptr.To[int32](0), 3, 5, failed(4)), revs: history(6, 100), want: []int64{1, 2, 6}},
		{name: "limit 0 keeps the revisions the status records as held", fb: fb(ptr.To[int32](0), 5, 5, heldInStatus(2)), revs: history(5, 100),
			want: []int64{1, 3, 4}},
		{name: "limit 0 keeps the revisions members are seen holding", fb: fb(ptr.To[int32](0), 5, 5), revs: history(5, 100),
			held: map[int64]bool{3: true, 0: true}, want: []int64{1, 2, 4}},
		{name: "a limit above the most admitted counts as the most", fb: fb(ptr.To[int32](100), 30, 30), revs: history(30, 100),
			want: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "beyond the bytes, the oldest unused go first", fb: fb(nil, 10, 10), revs: history(10, mib),
			want: []int64{1, 2}},
		{name: "exactly the bytes", fb: fb(nil, 8, 8), revs: history(8, mib), want: []int64{}},
		{name: "revisions in use count and stay, even beyond the bytes", fb: fb(nil, 1, 3, heldInStatus(2)), revs: history(4, 3*mib),
			want: []int64{4}},
		{name: "small revisions stay within the limit", fb: fb(ptr.To[int32](20), 21, 21), revs: history(21, 300*1024), want: []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, numbers(Prunable(tc.fb, tc.revs, tc.held))); diff != "" {
				t.Errorf("pruned (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecordHeld: the status records the revisions members hold, sorted, none for 0 (a member
// that holds nothing), the highest MaxHeldRevisions.
func TestRecordHeld(t *testing.T) {
	many := func(from, to int64) []int64 {
		var out []int64
		for n := from; n <= to; n++ {
			out = append(out, n)
		}
		return out
	}
	set := func(ns ...int64) map[int64]bool {
		m := map[int64]bool{}
		for _, n := range ns {
			m[n] = true
		}
		return m
	}
	for _, tc := range []struct {
		name string
		held map[int64]bool
		want []int64
	}{
		{name: "none", held: set(0), want: nil},
		{name: "sorted", held: set(7, 3, 0), want: []int64{3, 7}},
		{name: "bounded: the highest", held: set(many(1, 40)...), want: many(9, 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordHeld(tc.held)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("recorded (-want +got):\n%s", diff)
			}
			if len(got) > hubv1alpha1.MaxHeldRevisions {
				t.Errorf("recorded %d, more than %d", len(got), hubv1alpha1.MaxHeldRevisions)
			}
		})
	}
}

// TestNextRevisionNeverReusesANumber: the next revision is numbered above every number issued,
// recorded in status.observedRevision, even when the revision it named was pruned and the status
// names only lower ones (an undo after a halt).
func TestNextRevisionNeverReusesANumber(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   hubv1alpha1.FleetBundleStatus
		revs []Revision
		want int64
	}{
		{name: "first", want: 1},
		{name: "above the revisions kept", st: hubv1alpha1.FleetBundleStatus{CurrentRevision: 2, UpdateRevision: 2, ObservedRevision: 2}, revs: history(3, 1), want: 4},
		{name: "above a pruned revision after an undo", st: hubv1alpha1.FleetBundleStatus{CurrentRevision: 4, UpdateRevision: 4, ObservedRevision: 5},
			revs: []Revision{{Number: 4}}, want: 6},
		{name: "a status from before observedRevision", st: hubv1alpha1.FleetBundleStatus{CurrentRevision: 4, UpdateRevision: 6,
			Rollout: &hubv1alpha1.RolloutStatus{FailedRevision: 7}}, want: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextRevision(&hubv1alpha1.FleetBundle{Status: tc.st}, tc.revs); got != tc.want {
				t.Errorf("nextRevision = %d, want %d", got, tc.want)
			}
		})
	}
}
