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

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

// strategy is canary (ring=canary, 1 at once, soak 30s) then rest ({} , 50%).
func strategy(mod ...func(*hubv1alpha1.RolloutStrategy)) *hubv1alpha1.RolloutStrategy {
	s := &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{
		{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}},
			MaxConcurrency: ptr.To(intstr.FromInt32(1)), SoakTime: &metav1.Duration{Duration: 30 * time.Second}},
		{Name: "rest", ClusterSelector: &metav1.LabelSelector{}, MaxConcurrency: ptr.To(intstr.FromString("50%"))},
	}}
	for _, m := range mod {
		m(s)
	}
	return s
}

// member is a Ready member of stage holding revision held, its bundle Ready or not.
func member(name string, stage int, held int64, ready bool) Member {
	return Member{Name: name, Stage: stage, Ready: true, Held: held, BundleReady: ready, UpdatedAt: t0.Add(-time.Minute)}
}

// paused is a paused member of stage holding revision held: not Ready, skipped.
func paused(name string, stage int, held int64) Member {
	return Member{Name: name, Stage: stage, Held: held, Paused: true}
}

func skipPaused(s *hubv1alpha1.RolloutStrategy) { s.SkipPausedStages = true }

// gated makes stage i require approval, with approvals.
func gated(i int, approvals ...hubv1alpha1.RolloutApproval) func(*hubv1alpha1.RolloutStrategy) {
	return func(s *hubv1alpha1.RolloutStrategy) {
		s.Stages[i].RequireApproval = true
		s.Approvals = append(s.Approvals, approvals...)
	}
}

// approval approves revision for stage, by alice.
func approval(revision int64, stage string) hubv1alpha1.RolloutApproval {
	return hubv1alpha1.RolloutApproval{Revision: revision, Stage: stage, ApprovedBy: "alice"}
}

// soaked is the rollout of a revision whose canary stage soaked.
func soaked() *hubv1alpha1.RolloutStatus {
	ro := rolling("canary", "c1", hubv1alpha1.RolloutSoaking)
	ro.SoakStartTime = ptr.To(metav1.NewMicroTime(t0.Add(-31 * time.Second)))
	return ro
}

func failing(m Member) Member {
	m.BundleReady = false
	m.Failure = &hubv1alpha1.ClusterFailure{Cluster: m.Name, Reason: "UpdateFailed", Message: "refused"}
	return m
}

func rolling(stage, admitted string, phase hubv1alpha1.RolloutPhase) *hubv1alpha1.RolloutStatus {
	start := metav1.NewTime(t0.Add(-time.Hour))
	return &hubv1alpha1.RolloutStatus{Stage: stage, Phase: phase, AdmittedThrough: admitted, StageStartTime: &start}
}

// rolledBack is the rollout of a revision rolled back in the canary stage.
func rolledBack(revision int64) *hubv1alpha1.RolloutStatus {
	ro := rolling("canary", "", hubv1alpha1.RolloutRolledBack)
	ro.FailedRevision = revision
	return ro
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy *hubv1alpha1.RolloutStrategy
		status   hubv1alpha1.FleetBundleStatus
		update   int64
		members  []Member
		// want
		current  int64
		stage    string
		phase    hubv1alpha1.RolloutPhase
		admitted string
		failed   int64
		events   []string
		requeue  time.Duration
		// message, if set, is a part of the rollout's message.
		message string
		// noSoak: the soak is not running (soakStartTime unset).
		noSoak bool
	}{
		{name: "no stages: at once", status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1}, update: 2,
			current: 2},
		{name: "a new revision starts the first stage and admits one canary", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete}},
			update: 2, members: []Member{member("c1", 0, 1, true), member("c2", 0, 1, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c1", events: []string{hubv1alpha1.StageStartedEvent}},
		{name: "the next canary once the first is Ready", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, true), member("c2", 0, 1, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c2"},
		{name: "no next canary while one is updated and not Ready", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, false), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c1", requeue: 4 * time.Minute},
		{name: "a member not Ready is passed without taking a place", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{{Name: "c1", Stage: 0, Held: 1}, member("c2", 0, 1, true), member("c3", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c2"},
		{name: "a stage with no Ready member waits", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{{Name: "c1", Stage: 0, Held: 1}, member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing},
		{name: "a member joining holds its stage where it is", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: func() *hubv1alpha1.RolloutStatus {
				ro := rolling("canary", "c1", hubv1alpha1.RolloutSoaking)
				ro.SoakStartTime = ptr.To(metav1.NewMicroTime(t0.Add(-10 * time.Second)))
				return ro
			}()},
			update: 2, members: []Member{{Name: "c1", Stage: 0, Joining: true}, member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutSoaking, admitted: "c1"},
		{name: "a done stage soaks", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutSoaking, admitted: "c1", requeue: 30 * time.Second},
		{name: "a soaked stage starts the next, which admits half", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: func() *hubv1alpha1.RolloutStatus {
				ro := rolling("canary", "c1", hubv1alpha1.RolloutSoaking)
				ro.SoakStartTime = ptr.To(metav1.NewMicroTime(t0.Add(-31 * time.Second)))
				return ro
			}()},
			update: 2, members: []Member{member("c1", 0, 2, true), member("r1", 1, 1, true), member("r2", 1, 1, true), member("r3", 1, 1, true), member("r4", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing, admitted: "r2",
			events: []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.StageStartedEvent}},
		{name: "the last stage done completes", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("rest", "r2", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, true), member("r1", 1, 2, true), member("r2", 1, 2, true)},
			current: 2, stage: "rest", phase: hubv1alpha1.RolloutComplete,
			events: []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.RolloutCompleteEvent}},
		{name: "a failed canary halts", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{failing(member("c1", 0, 2, false)), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1", events: []string{hubv1alpha1.RolloutHaltedEvent}},
		{name: "halted stays halted without a second Event", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted)},
			update: 2, members: []Member{failing(member("c1", 0, 2, false)), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1"},
		{name: "halted goes on once the failure clears", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted)},
			update: 2, members: []Member{member("c1", 0, 2, true), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c2"},
		{name: "a halt holds while its failed member is not Ready", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted),
				FailedClusters: []hubv1alpha1.ClusterFailure{{Cluster: "c1", Reason: "UpdateFailed"}}},
			update: 2, members: []Member{{Name: "c1", Stage: 0, Held: 2}, member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1"},
		{name: "a halt holds while a member is joining", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted)},
			update: 2, members: []Member{{Name: "c1", Stage: 0, Joining: true}, member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1"},
		{name: "a tolerated failure does not halt and holds no stage back",
			strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) {
				s.MaxFailures = ptr.To(intstr.FromInt32(1))
				s.Stages[0].SoakTime = nil
			}),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{failing(member("c1", 0, 2, false)), member("r1", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing, admitted: "r1",
			events: []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.StageStartedEvent}},
		{name: "the progress deadline fails a member", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) {
			s.ProgressDeadline = &metav1.Duration{Duration: 30 * time.Second}
		}),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, false)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1", events: []string{hubv1alpha1.RolloutHaltedEvent}},
		{name: "a refused write fails the revision", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{func() Member { m := failing(member("c1", 0, 1, true)); m.Refused = true; return m }()},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1", events: []string{hubv1alpha1.RolloutHaltedEvent}},
		{name: "rollback", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{failing(member("c1", 0, 2, false))},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutRolledBack, failed: 2, events: []string{hubv1alpha1.RolledBackEvent}},
		{name: "rolled back stays rolled back", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolledBack(2)},
			update: 2, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutRolledBack, failed: 2},
		{name: "a new template after a rollback rolls out", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolledBack(2)},
			update: 3, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c1", failed: 2, events: []string{hubv1alpha1.StageStartedEvent}},
		{name: "the first revision halts instead of rolling back", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }),
			status: hubv1alpha1.FleetBundleStatus{UpdateRevision: 1, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 1, members: []Member{failing(member("c1", 0, 1, false))},
			current: 0, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1", events: []string{hubv1alpha1.RolloutHaltedEvent}},
		{name: "paused admits nobody", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) { s.Paused = true }),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete}},
			update: 2, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutPaused, events: []string{hubv1alpha1.StageStartedEvent}},
		{name: "a paused member among active ones holds its stage back in nothing", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c2", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{paused("c1", 0, 1), member("c2", 0, 2, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutSoaking, admitted: "c2", requeue: 30 * time.Second},
		{name: "a stage of paused members only holds the rollout", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{paused("c2", 0, 1), paused("c1", 0, 1), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing,
			message: "Stage canary: waiting for paused members c1, c2; resume them or set spec.rollout.skipPausedStages"},
		{name: "a new revision stops at a first stage of paused members", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete}},
			update: 2, members: []Member{paused("c1", 0, 1), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, events: []string{hubv1alpha1.StageStartedEvent},
			message: "waiting for paused members c1"},
		{name: "skipPausedStages passes a stage of paused members only", strategy: strategy(skipPaused),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{paused("c1", 0, 1), member("r1", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing, admitted: "r1", events: []string{hubv1alpha1.StageStartedEvent}},
		{name: "every member paused: the rollout holds at the first stage", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{paused("c1", 0, 1), paused("r1", 1, 1)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing},
		{name: "every member paused, skipPausedStages: the rollout completes without them", strategy: strategy(skipPaused),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{paused("c1", 0, 1), paused("r1", 1, 1)},
			current: 2, stage: "rest", phase: hubv1alpha1.RolloutComplete, events: []string{hubv1alpha1.RolloutCompleteEvent}},
		{name: "a later stage of paused members holds the rollout after the canary", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: func() *hubv1alpha1.RolloutStatus {
				ro := rolling("canary", "c1", hubv1alpha1.RolloutSoaking)
				ro.SoakStartTime = ptr.To(metav1.NewMicroTime(t0.Add(-31 * time.Second)))
				return ro
			}()},
			update: 2, members: []Member{member("c1", 0, 2, true), paused("r1", 1, 1), paused("r2", 1, 1)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing,
			events:  []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.StageStartedEvent},
			message: "Stage rest: waiting for paused members r1, r2"},
		{name: "a stage paused while it soaks stops its soak", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: func() *hubv1alpha1.RolloutStatus {
				ro := rolling("canary", "c1", hubv1alpha1.RolloutSoaking)
				ro.SoakStartTime = ptr.To(metav1.NewMicroTime(t0.Add(-31 * time.Second)))
				return ro
			}()},
			update: 2, members: []Member{paused("c1", 0, 2), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c1", noSoak: true},
		{name: "members resumed into a held stage are admitted within maxConcurrency", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 1, true), member("c2", 0, 1, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c1"},
		{name: "a member resumed into a stage passed fails the revision: rollback", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) {
			s.OnFailure = hubv1alpha1.OnFailureRollback
		}),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("rest", "r1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, true), failing(member("c2", 0, 2, false)), member("r1", 1, 2, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutRolledBack, failed: 2, events: []string{hubv1alpha1.RolledBackEvent}},
		{name: "a stage with paused and active members passes with the active ones", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) {
			s.Stages[0].SoakTime = nil
		}),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c2", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{paused("c1", 0, 1), member("c2", 0, 2, true), member("r1", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing, admitted: "r1",
			events: []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.StageStartedEvent}},
		{name: "an undo to currentRevision while halted completes in the last stage", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted)},
			update: 1, members: []Member{failing(member("c1", 0, 2, false)), member("r1", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutComplete},
		{name: "complete keeps the stage it named", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: rolling("rest", "", hubv1alpha1.RolloutComplete)},
			update: 1, members: []Member{member("c1", 0, 1, true), member("d1", 2, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutComplete},
		{name: "complete names the implicit last stage when it has members", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) {
			s.Stages[1].ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "rest"}}
		}),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted)},
			update: 1, members: []Member{member("c1", 0, 1, true), paused("d1", 2, 1)},
			current: 1, stage: "default", phase: hubv1alpha1.RolloutComplete},
		{name: "a member paused while it fails the revision keeps the halt", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted),
				FailedClusters: []hubv1alpha1.ClusterFailure{{Cluster: "c1", Reason: "UpdateFailed"}}},
			update: 2, members: []Member{failing(paused("c1", 0, 2)), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1"},
		{name: "a member paused while it fails the revision halts a rollout", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{failing(paused("c1", 0, 2)), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1", events: []string{hubv1alpha1.RolloutHaltedEvent}},
		{name: "a member paused once it recovered holds no halt", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutHalted),
				FailedClusters: []hubv1alpha1.ClusterFailure{{Cluster: "c1", Reason: "UpdateFailed"}}},
			update: 2, members: []Member{paused("c1", 0, 2), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c2"},
		{name: "maxFailures counts the members not paused", strategy: strategy(func(s *hubv1alpha1.RolloutStrategy) {
			s.MaxFailures = ptr.To(intstr.FromString("50%"))
		}),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{failing(member("c1", 0, 2, false)), paused("c2", 0, 1)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutHalted, admitted: "c1", events: []string{hubv1alpha1.RolloutHaltedEvent}},
		{name: "a new revision waits at a first stage requiring approval", strategy: strategy(gated(0)),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete}},
			update: 2, members: []Member{member("c1", 0, 1, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval,
			events: []string{hubv1alpha1.StageStartedEvent, hubv1alpha1.AwaitingApprovalEvent}, message: "Stage canary requires approval"},
		{name: "awaiting approval raises no second Event", strategy: strategy(gated(0)),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)},
			update: 2, members: []Member{member("c1", 0, 1, true), member("r1", 1, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval},
		{name: "an approval of another revision approves nothing", strategy: strategy(gated(0, approval(1, "canary"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)},
			update: 2, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval},
		{name: "an approval of another stage approves nothing", strategy: strategy(gated(0, approval(2, "rest"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)},
			update: 2, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval},
		{name: "the approval lets the stage go on", strategy: strategy(gated(0, approval(2, "canary"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)},
			update: 2, members: []Member{member("c1", 0, 1, true), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c1", events: []string{hubv1alpha1.RolloutApprovedEvent}},
		{name: "an approved stage goes on without another Event", strategy: strategy(gated(0, approval(2, "canary"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, true), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutProgressing, admitted: "c2"},
		{name: "a new revision waits again", strategy: strategy(gated(0, approval(2, "canary"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("rest", "r1", hubv1alpha1.RolloutProgressing)},
			update: 3, members: []Member{member("c1", 0, 2, true), member("r1", 1, 2, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval,
			events: []string{hubv1alpha1.StageStartedEvent, hubv1alpha1.AwaitingApprovalEvent}},
		{name: "a new revision waiting where the last one waited raises its own Event", strategy: strategy(gated(0)),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)},
			update: 3, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval,
			events: []string{hubv1alpha1.StageStartedEvent, hubv1alpha1.AwaitingApprovalEvent}},
		{name: "a later stage requiring approval waits once the canary soaked", strategy: strategy(gated(1, approval(2, "canary"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: soaked()},
			update: 2, members: []Member{member("c1", 0, 2, true), member("r1", 1, 1, true), member("r2", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutAwaitingApproval,
			events: []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.StageStartedEvent, hubv1alpha1.AwaitingApprovalEvent}},
		{name: "a stage approved before it starts goes on and names its approver", strategy: strategy(gated(1, approval(2, "rest"))),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: soaked()},
			update: 2, members: []Member{member("c1", 0, 2, true), member("r1", 1, 1, true), member("r2", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing, admitted: "r1",
			events: []string{hubv1alpha1.StageCompletedEvent, hubv1alpha1.StageStartedEvent, hubv1alpha1.RolloutApprovedEvent}},
		{name: "a stage requiring approval without members is passed", strategy: strategy(gated(0)),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete}},
			update: 2, members: []Member{member("r1", 1, 1, true)},
			current: 1, stage: "rest", phase: hubv1alpha1.RolloutProgressing, admitted: "r1", events: []string{hubv1alpha1.StageStartedEvent}},
		{name: "approval required mid-stage admits nobody more", strategy: strategy(gated(0)),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)},
			update: 2, members: []Member{member("c1", 0, 2, true), member("c2", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutAwaitingApproval, events: []string{hubv1alpha1.AwaitingApprovalEvent}},
		{name: "paused while awaiting approval", strategy: strategy(gated(0), func(s *hubv1alpha1.RolloutStrategy) { s.Paused = true }),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)},
			update: 2, members: []Member{member("c1", 0, 1, true)},
			current: 1, stage: "canary", phase: hubv1alpha1.RolloutPaused},
		{name: "empty stages pass without soaking", strategy: strategy(),
			status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 1, Rollout: &hubv1alpha1.RolloutStatus{Phase: hubv1alpha1.RolloutComplete}},
			update: 2, members: []Member{member("d1", 2, 1, true)},
			current: 1, stage: "default", phase: hubv1alpha1.RolloutProgressing, admitted: "d1",
			events: []string{hubv1alpha1.StageStartedEvent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Strategy: tc.strategy, Status: tc.status, Update: tc.update, Members: tc.members, Now: t0})
			if d.Current != tc.current {
				t.Errorf("current = %d, want %d", d.Current, tc.current)
			}
			if tc.strategy == nil {
				if d.Rollout != nil {
					t.Errorf("rollout = %+v, want none", d.Rollout)
				}
				return
			}
			ro := d.Rollout
			if ro.Stage != tc.stage || ro.Phase != tc.phase || ro.AdmittedThrough != tc.admitted || ro.FailedRevision != tc.failed {
				t.Errorf("rollout = stage %q phase %q admitted %q failed %d, want %q %q %q %d (%s)", ro.Stage, ro.Phase, ro.AdmittedThrough, ro.FailedRevision,
					tc.stage, tc.phase, tc.admitted, tc.failed, ro.Message)
			}
			if !strings.Contains(ro.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", ro.Message, tc.message)
			}
			if tc.noSoak && ro.SoakStartTime != nil {
				t.Errorf("soakStartTime = %s, want none: the soak does not run", ro.SoakStartTime)
			}
			var events []string
			for _, e := range d.Events {
				events = append(events, e.Reason)
			}
			if len(events) != len(tc.events) || (len(events) > 0 && !equalStrings(events, tc.events)) {
				t.Errorf("events = %v, want %v", events, tc.events)
			}
			if d.RequeueAfter != tc.requeue {
				t.Errorf("requeueAfter = %v, want %v", d.RequeueAfter, tc.requeue)
			}
			again := Decide(Input{Strategy: tc.strategy, Status: hubv1alpha1.FleetBundleStatus{CurrentRevision: d.Current, UpdateRevision: tc.update, Rollout: d.Rollout,
				FailedClusters: tc.status.FailedClusters},
				Update: tc.update, Members: tc.members, Now: t0})
			if again.Rollout.Stage != ro.Stage || again.Rollout.AdmittedThrough != ro.AdmittedThrough || again.Rollout.Phase != ro.Phase {
				t.Errorf("decided again on its own result: %+v, want %+v", again.Rollout, ro)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTargetRevision(t *testing.T) {
	canary := map[string]string{"ring": "canary"}
	fb := func(mod func(*hubv1alpha1.FleetBundle)) *hubv1alpha1.FleetBundle {
		f := &hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{Rollout: strategy()},
			Status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: rolling("canary", "c1", hubv1alpha1.RolloutProgressing)}}
		mod(f)
		return f
	}
	same := func(*hubv1alpha1.FleetBundle) {}
	for _, tc := range []struct {
		name   string
		fb     *hubv1alpha1.FleetBundle
		member string
		labels map[string]string
		held   int64
		want   int64
	}{
		{name: "no revision yet: keep", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Status = hubv1alpha1.FleetBundleStatus{} }), member: "c1", labels: canary},
		{name: "no stages: update", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Spec.Rollout = nil }), member: "r9", want: 2},
		{name: "admitted canary: update", fb: fb(same), member: "c1", labels: canary, held: 1, want: 2},
		{name: "canary not admitted yet: current", fb: fb(same), member: "c2", labels: canary, held: 1, want: 1},
		{name: "later stage: current", fb: fb(same), member: "a0", held: 1, want: 1},
		{name: "later stage, nothing held, first revision: nothing yet", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Status.CurrentRevision = 0 }), member: "r1"},
		{name: "passed stage: update", fb: fb(func(f *hubv1alpha1.FleetBundle) {
			f.Status.Rollout = rolling("rest", "", hubv1alpha1.RolloutProgressing)
		}),
			member: "c9", labels: canary, held: 1, want: 2},
		{name: "stage held by paused members, none admitted: current", fb: fb(func(f *hubv1alpha1.FleetBundle) {
			f.Status.Rollout = rolling("rest", "", hubv1alpha1.RolloutProgressing)
		}),
			member: "r1", held: 1, want: 1},
		{name: "passed while paused, not admitted again: current", fb: fb(func(f *hubv1alpha1.FleetBundle) {
			f.Status.Rollout = rolling("canary", "c3", hubv1alpha1.RolloutProgressing)
			f.Status.Rollout.PassedWhilePaused = []string{"c2"}
		}),
			member: "c2", labels: canary, held: 1, want: 1},
		{name: "holding update keeps it when halted", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Status.Rollout.Phase = hubv1alpha1.RolloutHalted }),
			member: "c1", labels: canary, held: 2, want: 2},
		{name: "halted admits nobody new", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Status.Rollout.Phase = hubv1alpha1.RolloutHalted }),
			member: "c1", labels: canary, held: 1, want: 1},
		{name: "paused admits nobody new", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Spec.Rollout.Paused = true }),
			member: "c1", labels: canary, held: 1, want: 1},
		{name: "rolled back: current even when holding update", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Status.Rollout.FailedRevision = 2 }),
			member: "c1", labels: canary, held: 2, want: 1},
		{name: "complete: update", fb: fb(func(f *hubv1alpha1.FleetBundle) { f.Status.CurrentRevision = 2 }), member: "r1", held: 1, want: 2},
		{name: "awaiting approval admits nobody of the stage", fb: fb(func(f *hubv1alpha1.FleetBundle) {
			f.Status.Rollout = rolling("canary", "", hubv1alpha1.RolloutAwaitingApproval)
		}),
			member: "c1", labels: canary, held: 1, want: 1},
		{name: "awaiting approval gives a stage passed the update", fb: fb(func(f *hubv1alpha1.FleetBundle) {
			f.Status.Rollout = rolling("rest", "", hubv1alpha1.RolloutAwaitingApproval)
		}),
			member: "c1", labels: canary, held: 1, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TargetRevision(tc.fb, tc.member, tc.labels, tc.held); got != tc.want {
				t.Errorf("TargetRevision = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestScaled(t *testing.T) {
	for _, tc := range []struct {
		v          *intstr.IntOrString
		total      int
		atLeastOne bool
		want       int
	}{
		{v: nil, total: 7, atLeastOne: true, want: 7}, // default 100%
		{v: ptr.To(intstr.FromInt32(3)), total: 7, want: 3},
		{v: ptr.To(intstr.FromString("25%")), total: 7, atLeastOne: true, want: 1},
		{v: ptr.To(intstr.FromString("25%")), total: 3, atLeastOne: true, want: 1},
		{v: ptr.To(intstr.FromString("25%")), total: 3, want: 0},
		{v: ptr.To(intstr.FromString("50%")), total: 10, want: 5},
		{v: ptr.To(intstr.FromString("junk")), total: 10, want: 10},
	} {
		if got := scaled(tc.v, tc.total, intstr.FromString("100%"), tc.atLeastOne); got != tc.want {
			t.Errorf("scaled(%v, %d, %v) = %d, want %d", tc.v, tc.total, tc.atLeastOne, got, tc.want)
		}
	}
}
