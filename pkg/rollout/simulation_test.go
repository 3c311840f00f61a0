package rollout

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// updateGolden rewrites the golden logs of the simulations: go test ./pkg/rollout -update.
var updateGolden = flag.Bool("update", false, "rewrite testdata/*.test.log.golden from the simulations")

// The simulations replay staged rollouts iteration by iteration, as Cluster API proves its
// MachineDeployment rollouts: a fleet held in memory (members with labels, the revision each
// holds and whether that bundle is Ready, paused or not) and a FleetBundle status. Each iteration
// does what the hub does, with the real planner only:
//
//  1. the fleetbundle-status controller: Decide from the status and the members, and write the
//     decision to the status;
//  2. the placement controller: each member that is Ready and not paused takes the revision
//     TargetRevision gives it;
//  3. the clock moves on a step, and each member settles: a bundle just written becomes Ready,
//     or fails if the member fails that revision, or stays not Ready if it never becomes Ready.
//
// A scenario's events change the fleet or the spec before an iteration. Every iteration writes
// what it decided and did to a log, compared with testdata/<scenario>.test.log.golden.

// simStep is how far the clock moves in one iteration.
const simStep = time.Minute

// simMember is one member of the simulated fleet.
type simMember struct {
	name   string
	labels map[string]string
	// held is the revision of the bundle the member holds, 0 if none.
	held int64
	// ready is whether that bundle is Ready.
	ready bool
	// updatedAt is when the hub last wrote that bundle, as the placement ledger remembers it.
	updatedAt time.Time
	// paused is the MemberCluster's spec.paused.
	paused bool
	// joining is whether the hub is still connecting to it.
	joining bool
	// fails are the revisions whose bundle is Ready=False in this member.
	fails map[int64]bool
	// stuck are the revisions whose bundle never becomes Ready in this member, nor fails.
	stuck map[int64]bool
	// refuses are the revisions whose write this member refuses (an admission policy).
	refuses map[int64]bool
	// refused is the revision whose write it refused last, as the placement ledger remembers it.
	refused int64
}

// simFleet is the fleet, the FleetBundle's spec.rollout and status, and the clock.
type simFleet struct {
	strategy *hubv1alpha1.RolloutStrategy
	status   hubv1alpha1.FleetBundleStatus
	// update is the revision of the FleetBundle's template.
	update  int64
	members []*simMember
	now     time.Time
	log     strings.Builder
}

// simEvent changes the simulated fleet before an iteration, and says what it did.
type simEvent struct {
	what string
	do   func(f *simFleet)
}

func (f *simFleet) logf(format string, args ...any) {
	fmt.Fprintf(&f.log, format+"\n", args...)
}

func (f *simFleet) member(name string) *simMember {
	for _, m := range f.members {
		if m.name == name {
			return m
		}
	}
	panic("no member " + name)
}

// rolloutMembers is what Decide knows of each member, as the status controller tells it.
func (f *simFleet) rolloutMembers() []Member {
	var out []Member
	for _, m := range f.members {
		rm := Member{Name: m.name, Stage: StageOf(f.strategy, m.labels), Ready: !m.paused && !m.joining, Paused: m.paused,
			Joining: !m.paused && m.joining}
		if !m.joining {
			rm.Held, rm.BundleReady, rm.UpdatedAt = m.held, m.ready, m.updatedAt
			if m.held != 0 && m.fails[m.held] {
				rm.Failure = &hubv1alpha1.ClusterFailure{Cluster: m.name, Reason: "ApplyFailed", Message: fmt.Sprintf("revision %d does not apply", m.held)}
			}
		}
		if m.refused == f.update && m.held != f.update {
			rm.Refused = true
			rm.Failure = &hubv1alpha1.ClusterFailure{Cluster: m.name, Reason: hubv1alpha1.PlacementFailedReason, Message: fmt.Sprintf("revision %d is refused", m.refused)}
		}
		out = append(out, rm)
	}
	return out
}

// fleetBundle is the FleetBundle as placement reads it.
func (f *simFleet) fleetBundle() *hubv1alpha1.FleetBundle {
	return &hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{Rollout: f.strategy}, Status: f.status}
}

// decide is the fleetbundle-status controller's part: Decide, and the status written.
func (f *simFleet) decide(i int) {
	members := f.rolloutMembers()
	d := Decide(Input{Strategy: f.strategy, Status: f.status, Update: f.update, Members: members, Now: f.now})
	f.status.UpdateRevision, f.status.CurrentRevision, f.status.Rollout = f.update, d.Current, d.Rollout
	// The status's failedClusters, as far as the rollout reads them: the members not paused
	// whose bundle fails.
	f.status.FailedClusters = nil
	for _, m := range members {
		if m.Failure != nil && !m.Paused {
			f.status.FailedClusters = append(f.status.FailedClusters, *m.Failure)
		}
	}
	ro := d.Rollout
	if ro == nil {
		f.logf("iteration %d: no staged rollout: current rev-%d", i, d.Current)
		return
	}
	f.logf("iteration %d: %s in stage %s, admitted through %q, current rev-%d, update rev-%d", i, ro.Phase, ro.Stage,
		ro.AdmittedThrough, d.Current, f.update)
	if len(ro.PassedWhilePaused) > 0 {
		f.logf("  passed while paused: %s", strings.Join(ro.PassedWhilePaused, ", "))
	}
	f.logf("  message: %s", ro.Message)
	for _, e := range d.Events {
		f.logf("  event %s %s (stage %s): %s", e.Type, e.Reason, e.Stage, e.Note)
	}
	for _, name := range sortedKeys(d.Failed) {
		f.logf("  failed: %s: %s", name, d.Failed[name].Reason)
	}
	if d.RequeueAfter > 0 {
		f.logf("  decide again in %s", d.RequeueAfter)
	}
}

// place is the placement controller's part: each member that is Ready and not paused takes the
// revision TargetRevision gives it.
func (f *simFleet) place() {
	fb := f.fleetBundle()
	for _, m := range f.members {
		if m.paused || m.joining {
			continue
		}
		n := TargetRevision(fb, m.name, m.labels, m.held)
		if n == 0 || n == m.held {
			continue
		}
		if m.refuses[n] {
			m.refused = n
			f.logf("  %s refuses rev-%d (%s)", m.name, n, f.flight(StageOf(f.strategy, m.labels)))
			continue
		}
		m.held, m.ready, m.updatedAt = n, false, f.now
		if n != f.update {
			f.logf("  %s takes rev-%d (the current revision)", m.name, n)
			continue
		}
		f.logf("  %s takes rev-%d (%s)", m.name, n, f.flight(StageOf(f.strategy, m.labels)))
	}
}

// flight says how many members of stage i hold the update and are not Ready, of how many its
// maxConcurrency lets be.
func (f *simFleet) flight(i int) string {
	var members, inFlight int
	for _, m := range f.members {
		if m.paused || StageOf(f.strategy, m.labels) != i {
			continue
		}
		members++
		if m.held == f.update && !m.ready {
			inFlight++
		}
	}
	most := scaled(maxConcurrency(f.strategy, i), members, intstr.FromString(hubv1alpha1.DefaultMaxConcurrency), true)
	return fmt.Sprintf("stage %s, %d/%d in flight", StageNames(f.strategy)[i], inFlight, most)
}

// settle moves the clock on a step and settles each member's bundle.
func (f *simFleet) settle() {
	f.now = f.now.Add(simStep)
	for _, m := range f.members {
		switch {
		case m.held == 0 || m.ready || m.paused || m.joining:
		case m.fails[m.held]:
		case m.stuck[m.held]:
		default:
			m.ready = true
		}
	}
}

// state is one line of where every member stands.
func (f *simFleet) state() string {
	var parts []string
	for _, m := range f.members {
		s := fmt.Sprintf("%s rev-%d", m.name, m.held)
		switch {
		case m.held != 0 && m.fails[m.held]:
			s += " failing"
		case m.ready:
			s += " ready"
		default:
			s += " not-ready"
		}
		if m.paused {
			s += " paused"
		}
		if m.joining {
			s += " joining"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// simScenario is a rollout of revision 2 over a fleet that holds revision 1 everywhere.
type simScenario struct {
	name     string
	strategy *hubv1alpha1.RolloutStrategy
	// members are name=stage label pairs.
	members []string
	// events change the fleet before the iteration of their index.
	events map[int][]simEvent
	// iterations is how many iterations run at most; the simulation stops earlier once the
	// rollout is Complete or RolledBack and no member changes.
	iterations int
}

// canaryThenRest is a canary stage (stage=canary) and the implicit rest, with a 3-minute soak.
func canaryThenRest(mod ...func(*hubv1alpha1.RolloutStrategy)) *hubv1alpha1.RolloutStrategy {
	s := &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{Name: "canary",
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}}}}
	for _, m := range mod {
		m(s)
	}
	return s
}

func soak(d time.Duration) func(*hubv1alpha1.RolloutStrategy) {
	return func(s *hubv1alpha1.RolloutStrategy) { s.Stages[0].SoakTime = &metav1.Duration{Duration: d} }
}

func rollback(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }

// fails makes member fail the revision rolled out (rev-2) from now on.
func fails(member string) simEvent {
	return simEvent{what: member + " fails rev-2", do: func(f *simFleet) {
		f.member(member).fails = map[int64]bool{f.update: true}
	}}
}

// fixed makes member's bundle of the revision it holds Ready.
func fixed(member string) simEvent {
	return simEvent{what: member + " is fixed", do: func(f *simFleet) {
		m := f.member(member)
		m.fails, m.stuck, m.ready = nil, nil, true
	}}
}

// pausedMembers pauses or resumes members at once (MemberCluster spec.paused).
func pausedMembers(paused bool, members ...string) simEvent {
	verb, what := " are ", "resumed"
	if len(members) == 1 {
		verb = " is "
	}
	if paused {
		what = "paused"
	}
	return simEvent{what: strings.Join(members, ", ") + verb + what, do: func(f *simFleet) {
		for _, m := range members {
			f.member(m).paused = paused
		}
	}}
}

// refuses makes member refuse the write of the revision rolled out (rev-2) from now on, as an
// admission policy does.
func refuses(member string) simEvent {
	return simEvent{what: member + " refuses rev-2", do: func(f *simFleet) {
		f.member(member).refuses = map[int64]bool{f.update: true}
	}}
}

// canaryMidRest is the red team's rollout: canary (stage=canary), mid (stage=mid, one member
// at a time, soak 2s) and rest (stage=rest, one at a time), maxFailures 0, onFailure Rollback.
func canaryMidRest(mod ...func(*hubv1alpha1.RolloutStrategy)) *hubv1alpha1.RolloutStrategy {
	stage := func(name string) hubv1alpha1.RolloutStage {
		return hubv1alpha1.RolloutStage{Name: name, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": name}}}
	}
	s := &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{stage("canary"), stage("mid"), stage("rest")},
		MaxFailures: ptr.To(intstr.FromInt32(0)), OnFailure: hubv1alpha1.OnFailureRollback}
	s.Stages[1].MaxConcurrency, s.Stages[1].SoakTime = ptr.To(intstr.FromInt32(1)), &metav1.Duration{Duration: 2 * time.Second}
	s.Stages[2].MaxConcurrency = ptr.To(intstr.FromInt32(1))
	for _, m := range mod {
		m(s)
	}
	return s
}

// pausedRollout sets spec.rollout.paused.
func pausedRollout(paused bool) simEvent {
	return simEvent{what: fmt.Sprintf("spec.rollout.paused is %t", paused), do: func(f *simFleet) { f.strategy.Paused = paused }}
}

// approved approves rev-2 for stage, by alice.
func approved(stage string) simEvent {
	return simEvent{what: "alice approves rev-2 for stage " + stage, do: func(f *simFleet) {
		f.strategy.Approvals = append(f.strategy.Approvals, hubv1alpha1.RolloutApproval{Revision: 2, Stage: stage, ApprovedBy: "alice"})
	}}
}

func simScenarios() []simScenario {
	fourCanaries := []string{"c1=canary", "c2=canary", "c3=canary", "c4=canary", "r1=", "r2="}
	redTeam := []string{"m1=canary", "m2=mid", "m3=mid", "m4=rest", "m5=rest", "m6=rest"}
	laterStagesPaused := []simEvent{pausedMembers(true, "m2", "m3", "m4", "m5", "m6"), refuses("m4")}
	return []simScenario{
		{name: "canary-then-rest", strategy: canaryThenRest(), members: []string{"c1=canary", "r1=", "r2=", "r3="}, iterations: 10},
		{name: "soak", strategy: canaryThenRest(soak(3 * time.Minute)), members: []string{"c1=canary", "r1=", "r2="}, iterations: 12},
		{name: "max-concurrency", strategy: canaryThenRest(func(s *hubv1alpha1.RolloutStrategy) {
			s.Stages[0].MaxConcurrency = ptr.To(intstr.FromInt32(2))
		}), members: fourCanaries, iterations: 12},
		{name: "halt", strategy: canaryThenRest(), members: []string{"c1=canary", "c2=canary", "r1="},
			events: map[int][]simEvent{1: {fails("c1")}}, iterations: 4},
		{name: "unhalt", strategy: canaryThenRest(), members: []string{"c1=canary", "c2=canary", "r1="},
			events: map[int][]simEvent{1: {fails("c1")}, 5: {fixed("c1")}}, iterations: 12},
		{name: "rollback", strategy: canaryThenRest(rollback), members: []string{"c1=canary", "c2=canary", "r1="},
			events: map[int][]simEvent{1: {fails("c2")}}, iterations: 10},
		{name: "pause", strategy: canaryThenRest(soak(2 * time.Minute)), members: []string{"c1=canary", "r1=", "r2="},
			events: map[int][]simEvent{3: {pausedRollout(true)}, 6: {pausedRollout(false)}}, iterations: 14},
		{name: "deadline", strategy: canaryThenRest(func(s *hubv1alpha1.RolloutStrategy) {
			s.ProgressDeadline = &metav1.Duration{Duration: 3 * time.Minute}
		}), members: []string{"c1=canary", "r1="},
			events:     map[int][]simEvent{1: {{what: "c1 never makes rev-2 Ready", do: func(f *simFleet) { f.member("c1").stuck = map[int64]bool{2: true} }}}},
			iterations: 6},
		{name: "paused-member", strategy: canaryThenRest(), members: []string{"c1=canary", "c2=canary", "r1=", "r2="},
			events: map[int][]simEvent{1: {pausedMembers(true, "c2")}, 7: {pausedMembers(false, "c2")}}, iterations: 12},
		// The rollout holds at a stage whose members are all paused; resumed at once, they are
		// admitted one at a time, soaked, and m4's refusal rolls the rollout back.
		{name: "paused-stage", strategy: canaryMidRest(), members: redTeam,
			events:     map[int][]simEvent{1: laterStagesPaused, 4: {pausedMembers(false, "m2", "m3", "m4", "m5", "m6")}},
			iterations: 14},
		// skipPausedStages passes the stages of paused members: the rollout completes after the
		// canary, and members resumed later take the revision at once.
		{name: "skip-paused-stages", strategy: canaryMidRest(func(s *hubv1alpha1.RolloutStrategy) { s.SkipPausedStages = true }), members: redTeam,
			events:     map[int][]simEvent{1: laterStagesPaused, 4: {pausedMembers(false, "m2", "m3", "m4", "m5", "m6")}},
			iterations: 8},
		// A stage whose members are all paused while it soaks stops its soak, and soaks again
		// in full once they are resumed.
		{name: "paused-during-soak", strategy: canaryThenRest(soak(3 * time.Minute)), members: []string{"c1=canary", "c2=canary", "r1="},
			events: map[int][]simEvent{3: {pausedMembers(true, "c1", "c2")}, 5: {pausedMembers(false, "c1", "c2")}}, iterations: 14},
		// A member of a stage already passed, resumed while the rollout is in a later stage, takes
		// the revision at once; its failure counts against maxFailures and rolls the rollout back.
		{name: "resumed-in-passed-stage", strategy: canaryThenRest(rollback), members: []string{"c1=canary", "c2=canary", "r1=", "r2="},
			events: map[int][]simEvent{1: {pausedMembers(true, "c2"), fails("c2"), {what: "r1 never makes rev-2 Ready", do: func(f *simFleet) {
				f.member("r1").stuck = map[int64]bool{2: true}
			}}}, 4: {pausedMembers(false, "c2")}},
			iterations: 10},
		// A member that admittedThrough passed while it was paused, resumed while the stage's
		// one place is taken, waits for it: maxConcurrency holds for members resumed one by one.
		{name: "passed-while-paused", strategy: canaryMidRest(), members: []string{"m1=canary", "m2=mid", "m3=mid", "m4=rest"},
			events: map[int][]simEvent{1: {pausedMembers(true, "m2"), {what: "m3 is slow to make rev-2 Ready", do: func(f *simFleet) {
				f.member("m3").stuck = map[int64]bool{2: true}
			}}}, 4: {pausedMembers(false, "m2")}, 6: {fixed("m3")}},
			iterations: 14},
		// Stage mid requires approval: the rollout waits there, admitting none of its members,
		// until rev-2 is approved for it, then goes on.
		{name: "approval", strategy: canaryMidRest(func(s *hubv1alpha1.RolloutStrategy) { s.Stages[1].RequireApproval = true }),
			members: []string{"m1=canary", "m2=mid", "m3=mid", "m4=rest"}, events: map[int][]simEvent{5: {approved("mid")}}, iterations: 12},
		{name: "member-joins-mid-stage", strategy: canaryThenRest(func(s *hubv1alpha1.RolloutStrategy) {
			s.Stages[0].MaxConcurrency = ptr.To(intstr.FromInt32(1))
		}), members: []string{"c1=canary", "c3=canary", "r1="},
			events: map[int][]simEvent{2: {{what: "c2 joins the canary stage, holding nothing", do: func(f *simFleet) {
				f.members = append(f.members, &simMember{name: "c2", labels: map[string]string{"stage": "canary"}, joining: true})
				slices.SortFunc(f.members, func(a, b *simMember) int { return strings.Compare(a.name, b.name) })
			}}}, 3: {{what: "c2 is connected", do: func(f *simFleet) { f.member("c2").joining = false }}}},
			iterations: 12},
		{name: "hub-restart", strategy: canaryThenRest(soak(3 * time.Minute)), members: []string{"c1=canary", "c2=canary", "r1=", "r2="},
			events: map[int][]simEvent{3: {{what: "the hub restarts: the status is read back, the ledger is empty, every member joins again",
				do: func(f *simFleet) {
					raw, err := json.Marshal(f.status)
					if err != nil {
						panic(err)
					}
					f.status = hubv1alpha1.FleetBundleStatus{}
					if err := json.Unmarshal(raw, &f.status); err != nil {
						panic(err)
					}
					for _, m := range f.members {
						m.joining, m.updatedAt = true, time.Time{}
					}
				}}}, 4: {{what: "every member is connected again", do: func(f *simFleet) {
				for _, m := range f.members {
					m.joining, m.updatedAt = false, f.now // the ledger learns when it first sees the held revision
				}
			}}}},
			iterations: 12},
	}
}

// run plays the scenario and returns its log.
func (sc simScenario) run() string {
	f := &simFleet{strategy: sc.strategy.DeepCopy(), update: 2, now: t0,
		status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1,
			Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete, Stage: sc.strategy.Stages[0].Name}}}
	for _, spec := range sc.members {
		name, stage, _ := strings.Cut(spec, "=")
		labels := map[string]string{}
		if stage != "" {
			labels["stage"] = stage
		}
		f.members = append(f.members, &simMember{name: name, labels: labels, held: 1, ready: true, updatedAt: t0.Add(-time.Hour)})
	}
	f.logf("scenario %s: the template changes to rev-2; stages %s", sc.name, strings.Join(StageNames(f.strategy), ", "))
	for i := 1; i <= sc.iterations; i++ {
		for _, e := range sc.events[i] {
			f.logf("iteration %d: %s", i, e.what)
			e.do(f)
		}
		f.logf("iteration %d at +%s: %s", i, f.now.Sub(t0), f.state())
		before := f.state()
		f.decide(i)
		f.place()
		f.settle()
		if i == sc.iterations || f.settledAfterEvents(sc, i, before) {
			f.logf("end at +%s: %s", f.now.Sub(t0), f.state())
			break
		}
	}
	return f.log.String()
}

// settledAfterEvents reports whether the rollout ended (Complete or RolledBack), no member
// changed in iteration i, and no event of the scenario is still to come.
func (f *simFleet) settledAfterEvents(sc simScenario, i int, before string) bool {
	ro := f.status.Rollout
	if ro == nil || (ro.Phase != hubv1alpha1.RolloutComplete && ro.Phase != hubv1alpha1.RolloutRolledBack) || f.state() != before {
		return false
	}
	for at := range sc.events {
		if at > i {
			return false
		}
	}
	return true
}

// TestRolloutSimulations replays each scenario and compares its log with its golden file.
func TestRolloutSimulations(t *testing.T) {
	for _, sc := range simScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			got := sc.run()
			path := filepath.Join("testdata", sc.name+".test.log.golden")
			if *updateGolden {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading the golden log (go test ./pkg/rollout -update writes it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("the simulation's log differs from %s (-want +got; go test ./pkg/rollout -update rewrites it):\n%s", path, diff)
			}
		})
	}
}
