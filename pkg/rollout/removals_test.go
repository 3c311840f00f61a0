package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func maxRemovals(v intstr.IntOrString) func(*hubv1alpha1.RolloutStrategy) {
	return func(s *hubv1alpha1.RolloutStrategy) { s.MaxRemovals = &v }
}

func approving(set string) func(*hubv1alpha1.RolloutStrategy) {
	return func(s *hubv1alpha1.RolloutStrategy) {
		s.RemovalApprovals = append(s.RemovalApprovals, hubv1alpha1.RemovalApproval{RemovalSet: set, ApprovedBy: "alice"})
	}
}

func removing(stage string, members ...string) *hubv1alpha1.RemovalStatus {
	return &hubv1alpha1.RemovalStatus{Stage: stage, Members: members, Pending: int32(len(members))}
}

func TestDecideRemovals(t *testing.T) {
	t.Parallel()
	abc := []Removal{{Name: "c", Stage: 1}, {Name: "a", Stage: 0}, {Name: "b", Stage: 1}}
	soaking := removing("canary", "b", "c")
	soaking.SoakStartTime = &metav1.MicroTime{Time: t0.Add(-10 * time.Second)}
	tests := []struct {
		name     string
		strategy *hubv1alpha1.RolloutStrategy
		status   *hubv1alpha1.RemovalStatus
		pending  []Removal
		holders  int

		wantNil     bool
		wantHeld    bool
		wantStage   string
		wantMembers []string
		wantEvent   string
		wantRequeue time.Duration
	}{
		{name: "nothing pending: no status", strategy: strategy(), pending: nil, holders: 3, wantNil: true},
		{name: "no limit: the first stage with removals goes", strategy: strategy(), pending: abc, holders: 3,
			wantStage: "canary", wantMembers: []string{"a", "b", "c"}},
		{name: "within maxRemovals", strategy: strategy(maxRemovals(intstr.FromInt32(3))), pending: abc, holders: 3,
			wantStage: "canary", wantMembers: []string{"a", "b", "c"}},
		{name: "beyond maxRemovals: held, nothing admitted", strategy: strategy(maxRemovals(intstr.FromInt32(1))), pending: abc, holders: 3,
			wantHeld: true, wantEvent: hubv1alpha1.RemovalHeldEvent},
		{name: "a percentage of the holders", strategy: strategy(maxRemovals(intstr.FromString("50%"))), pending: abc, holders: 4,
			wantHeld: true, wantEvent: hubv1alpha1.RemovalHeldEvent},
		{name: "a percentage of the holders, within", strategy: strategy(maxRemovals(intstr.FromString("50%"))), pending: abc[:2], holders: 4,
			wantStage: "canary", wantMembers: []string{"a", "c"}},
		{name: "held again: no second Event", strategy: strategy(maxRemovals(intstr.FromInt32(1))), pending: abc, holders: 3,
			status: &hubv1alpha1.RemovalStatus{Held: true, RemovalSet: RemovalSet([]string{"a", "b", "c"})}, wantHeld: true},
		{name: "approved: proceeds", strategy: strategy(maxRemovals(intstr.FromInt32(1)), approving(RemovalSet([]string{"a", "b", "c"}))),
			pending: abc, holders: 3, status: &hubv1alpha1.RemovalStatus{Held: true}, wantStage: "canary", wantMembers: []string{"a", "b", "c"}},
		{name: "an approval of another set does not", strategy: strategy(maxRemovals(intstr.FromInt32(1)), approving(RemovalSet([]string{"a", "b"}))),
			pending: abc, holders: 3, wantHeld: true, wantEvent: hubv1alpha1.RemovalHeldEvent},
		{name: "admitted ones going: no new hold as they shrink", strategy: strategy(maxRemovals(intstr.FromInt32(1))),
			pending: []Removal{{Name: "b", Stage: 1}, {Name: "c", Stage: 1}}, holders: 2, status: removing("rest", "a", "b", "c"), wantStage: "rest", wantMembers: []string{"b", "c"}},
		{name: "stage done, soak running", strategy: strategy(), pending: abc[:1], holders: 1,
			status: soaking, wantStage: "canary", wantMembers: []string{"c"}, wantRequeue: 20 * time.Second},
		{name: "stage done, soak starts now", strategy: strategy(), pending: []Removal{{Name: "b", Stage: 1}, {Name: "c", Stage: 1}}, holders: 2,
			status: removing("canary", "a", "b", "c"), wantStage: "canary", wantMembers: []string{"b", "c"}, wantRequeue: 30 * time.Second},
		{name: "a stage without soak passes", strategy: strategy(), pending: []Removal{{Name: "d", Stage: 2}}, holders: 1,
			status: removing("rest", "c", "d"), wantStage: "default", wantMembers: []string{"d"}},
		{name: "a new removal starts from the first stage", strategy: strategy(), pending: []Removal{{Name: "a", Stage: 0}, {Name: "d", Stage: 2}},
			holders: 2, status: removing("default", "d"), wantStage: "canary", wantMembers: []string{"a", "d"}},
		{name: "no stages: every member at once", strategy: &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromInt32(5))},
			pending: []Removal{{Name: "a"}, {Name: "b"}}, holders: 2, wantStage: "default", wantMembers: []string{"a", "b"}},
		{name: "maxRemovals 0 holds any removal", strategy: &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromInt32(0))},
			pending: []Removal{{Name: "a"}}, holders: 2, wantHeld: true, wantEvent: hubv1alpha1.RemovalHeldEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := DecideRemovals(RemovalInput{Strategy: tt.strategy, Status: tt.status, Pending: tt.pending, Holders: tt.holders,
				Cause: "the binding team-a/global was deleted", Revision: 1, Now: t0})
			if tt.wantNil {
				if d.Status != nil {
					t.Fatalf("status = %+v, want none", d.Status)
				}
				return
			}
			st := d.Status
			if st.Held != tt.wantHeld || st.Stage != tt.wantStage || strings.Join(st.Members, ",") != strings.Join(tt.wantMembers, ",") {
				t.Fatalf("status = held %v stage %q members %v, want held %v stage %q members %v (%s)", st.Held, st.Stage, st.Members,
					tt.wantHeld, tt.wantStage, tt.wantMembers, st.Message)
			}
			if st.Held && (!strings.Contains(st.Message, "3 members") && !strings.Contains(st.Message, "1 member") ||
				!strings.Contains(st.Message, "the binding team-a/global was deleted")) {
				t.Errorf("message = %q, want how many members and why", st.Message)
			}
			if got := eventReasons(d.Events); got != tt.wantEvent {
				t.Errorf("events = %q, want %q", got, tt.wantEvent)
			}
			if d.RequeueAfter != tt.wantRequeue {
				t.Errorf("requeueAfter = %v, want %v", d.RequeueAfter, tt.wantRequeue)
			}
		})
	}
}

func eventReasons(es []Event) string {
	var rs []string
	for _, e := range es {
		rs = append(rs, e.Reason)
	}
	return strings.Join(rs, ",")
}

func TestRemovalAdmitted(t *testing.T) {
	t.Parallel()
	canary, rest := map[string]string{"ring": "canary"}, map[string]string{}
	fb := func(s *hubv1alpha1.RolloutStrategy, rm *hubv1alpha1.RemovalStatus) *hubv1alpha1.FleetBundle {
		f := &hubv1alpha1.FleetBundle{}
		f.Spec.Rollout = s
		if rm != nil {
			f.Status.Rollout = &hubv1alpha1.RolloutStatus{Removals: rm}
		}
		return f
	}
	tests := []struct {
		name   string
		fb     *hubv1alpha1.FleetBundle
		member string
		labels map[string]string
		want   bool
	}{
		{name: "no rollout: at once", fb: fb(nil, nil), member: "a", labels: rest, want: true},
		{name: "no decision yet: waits", fb: fb(strategy(), nil), member: "a", labels: canary},
		{name: "held: waits", fb: fb(strategy(), &hubv1alpha1.RemovalStatus{Held: true, Stage: "default", Members: []string{"a"}}), member: "a", labels: canary},
		{name: "not named: waits", fb: fb(strategy(), removing("default", "b")), member: "a", labels: canary},
		{name: "its stage: goes", fb: fb(strategy(), removing("canary", "a", "b")), member: "a", labels: canary, want: true},
		{name: "a later stage: waits", fb: fb(strategy(), removing("canary", "a", "b")), member: "b", labels: rest},
		{name: "a stage passed: goes", fb: fb(strategy(), removing("rest", "a", "b")), member: "a", labels: canary, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RemovalAdmitted(tt.fb, tt.member, tt.labels); got != tt.want {
				t.Errorf("RemovalAdmitted = %v, want %v", got, tt.want)
			}
		})
	}
}
