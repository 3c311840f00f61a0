package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// A staged rollout is decided in two places from the same facts. The fleetbundle-status
// controller (the one replica that sees the whole fleet) decides where the rollout stands
// (Decide): the revisions, the current stage, how far into the stage members are admitted, the
// phase; it writes that to the FleetBundle's status in one write. The placement controller then
// gives each member the revision that status says it gets (TargetRevision), from facts it reads
// on its own: the member's stage (its labels) and the revision it holds. Nothing is latched in
// memory: a hub that restarts reads where it stood from the status, and where each member
// stands from the member.

// Member is what a rollout needs to know of one selected member.
type Member struct {
	// Name is the member's name.
	Name string
	// Stage is the index of the member's stage (StageOf).
	Stage int
	// Ready is whether the member is reachable (and not paused): a member that is not is
	// neither updated nor a failure, and the rollout does not wait for it.
	Ready bool
	// Paused is whether the member is paused (MemberCluster spec.paused; Ready is then false):
	// it is neither updated nor counted, but a stage whose members are all paused holds the
	// rollout (unless spec.rollout.skipPausedStages): a stage is passed only by members that
	// took the revision. A stage with members not paused does not wait for its paused ones.
	// Once resumed, a member is one like any other: in the current stage it is admitted within
	// maxConcurrency (one that admittedThrough passed while it was paused waits in
	// passedWhilePaused for a free place), in a stage passed it gets the revision at once, and
	// anywhere its failure counts against maxFailures.
	Paused bool
	// Joining is whether the hub is still connecting to the member for the first time (a hub
	// that just started): where it stands is not known yet, so its stage neither moves on nor
	// restarts its soak until it is.
	Joining bool
	// Held is the revision of the bundle the member holds, 0 if none.
	Held int64
	// BundleReady is whether that bundle is Ready for its current generation.
	BundleReady bool
	// Failure is that bundle's Ready=False, if it is; or, with Refused, why the member refused it.
	Failure *hubv1alpha1.ClusterFailure
	// Refused is whether the member refused the hub's write of the revision it gets (Failure
	// says why): a failure of that revision although the member does not hold it.
	Refused bool
	// UpdatedAt is when the hub last wrote that bundle; zero if unknown.
	UpdatedAt time.Time
	// Workloads, with spec.rollout.workloads Observe or Restart, is where the consumers of
	// that bundle stand: the member counts as updated only once they are done
	// (JudgeWorkloads). Nil with Ignore.
	Workloads *Workloads
}

// Input is what Decide decides from.
type Input struct {
	// Strategy is the FleetBundle's spec.rollout; nil: no staged rollout.
	Strategy *hubv1alpha1.RolloutStrategy
	// Status is the FleetBundle's status as last written.
	Status hubv1alpha1.FleetBundleStatus
	// Update is the revision of the FleetBundle's template.
	Update int64
	// Members are the selected members, in any order.
	Members []Member
	// Now is the time of the decision.
	Now time.Time
	// Tally, if set, counts the members for the rollout of Update in place of Members' Held,
	// BundleReady, Failure and UpdatedAt (which are then unknown): the sum of the sharded
	// replicas' tallies of the members each manages. It is used only if it counts Update and
	// the status's stage and admittedThrough.
	Tally *Tally
}

// Event is an Event a decision records on the FleetBundle.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is one of the rollout's Event reasons (hubv1alpha1.StageStartedEvent, ...).
	Reason string
	// Note says what happened, naming the revision and the members.
	Note string
	// Revision is the revision it is about.
	Revision int64
	// Stage is the stage it is about.
	Stage string
}

// Decision is where a rollout stands.
type Decision struct {
	// Current is the new status.currentRevision.
	Current int64
	// Rollout is the new status.rollout; nil without a staged rollout.
	Rollout *hubv1alpha1.RolloutStatus
	// Failed are the members that failed the rollout of Update, by name: their bundle is
	// Ready=False, or not Ready progressDeadline after it was updated.
	Failed map[string]hubv1alpha1.ClusterFailure
	// Events are the Events of what changed.
	Events []Event
	// RequeueAfter is when the decision must be made again although no fact changes (a soak or
	// a progress deadline ends); 0: never.
	RequeueAfter time.Duration
}

// StageNames are the names of a rollout's stages, the implicit last stage
// (hubv1alpha1.DefaultStageName) included.
func StageNames(s *hubv1alpha1.RolloutStrategy) []string {
	names := make([]string, 0, len(s.Stages)+1)
	for _, st := range s.Stages {
		names = append(names, st.Name)
	}
	return append(names, hubv1alpha1.DefaultStageName)
}

// StageOf is the index of the stage of a member with these labels: the first stage whose selector
// selects it, else the implicit last one (len(s.Stages)). An invalid selector selects nobody.
func StageOf(s *hubv1alpha1.RolloutStrategy, memberLabels map[string]string) int {
	for i, st := range s.Stages {
		if ok, err := fleetbundle.Selects(st.ClusterSelector, memberLabels); err == nil && ok {
			return i
		}
	}
	return len(s.Stages)
}

// TargetRevision is the revision a member gets, from the FleetBundle's status: 0 means none is
// decided for it yet, and the member keeps what it holds (nothing, if it holds nothing).
//   - Without a staged rollout, or once the rollout completed: updateRevision.
//   - Rolled back (failedRevision is updateRevision): currentRevision.
//   - A member already holding updateRevision keeps it.
//   - Paused or halted: currentRevision for the others.
//   - Otherwise updateRevision for the members of the stages passed and those of the current
//     stage admitted so far (named up to admittedThrough, but for those passed while paused and
//     not admitted again), currentRevision for the others.
func TargetRevision(fb *hubv1alpha1.FleetBundle, member string, memberLabels map[string]string, held int64) int64 {
	st, s := &fb.Status, fb.Spec.Rollout
	u, c := st.UpdateRevision, st.CurrentRevision
	ro := st.Rollout
	switch {
	case u == 0, s == nil, u == c:
		return u
	case ro != nil && ro.FailedRevision == u:
		return c
	case held == u:
		return u
	case s.Paused || ro == nil || ro.Phase == hubv1alpha1.RolloutHalted || ro.Phase == hubv1alpha1.RolloutPaused:
		return c
	}
	current := slices.Index(StageNames(s), ro.Stage)
	stage := StageOf(s, memberLabels)
	if current >= 0 && (stage < current || (stage == current && ro.AdmittedThrough != "" && member <= ro.AdmittedThrough &&
		!slices.Contains(ro.PassedWhilePaused, member))) {
		return u
	}
	return c
}

// Decide decides where the rollout of in.Update stands. It is a function of facts: the status
// last written (the revisions, the stage, how far it admitted members, when its soak started)
// and where each member stands now; computed twice on the same facts, it decides the same.
func Decide(in Input) Decision {
	u, c := in.Update, in.Status.CurrentRevision
	if in.Strategy == nil {
		return Decision{Current: u} // no stages: every member gets it at once
	}
	d := &decision{in: in, s: in.Strategy, names: StageNames(in.Strategy), out: Decision{Current: c}}
	prev := in.Status.Rollout
	ro := hubv1alpha1.RolloutStatus{}
	if prev != nil {
		ro = *prev.DeepCopy()
	}
	d.ro, d.prevPhase = &ro, ro.Phase
	d.out.Rollout = &ro
	if c == u {
		ro.Phase, ro.AdmittedThrough, ro.SoakStartTime = hubv1alpha1.RolloutComplete, "", nil
		if d.prevPhase != hubv1alpha1.RolloutComplete || slices.Index(d.names, ro.Stage) < 0 {
			ro.Stage = d.lastStage() // also after an undo to currentRevision, in whatever stage it stood
		}
		ro.Message = fmt.Sprintf("Revision %d is rolled out", u)
		return d.out
	}
	if prev == nil || in.Status.UpdateRevision != u || slices.Index(d.names, ro.Stage) < 0 {
		d.startStage(0) // a new revision, or a stage that no longer exists: from the first stage
	}
	if ro.FailedRevision == u {
		ro.Phase = hubv1alpha1.RolloutRolledBack
		if d.prevPhase != hubv1alpha1.RolloutRolledBack {
			ro.Message = fmt.Sprintf("Revision %d was rolled back to revision %d; no member gets it again until the template changes", u, c)
		}
		return d.out
	}
	if in.Tally != nil && in.Status.UpdateRevision == u && in.Status.Rollout != nil && ro.Stage == in.Status.Rollout.Stage {
		d.tally = *in.Tally
	} else {
		d.tally = TallyMembers(d.s, u, Where{Stage: slices.Index(d.names, ro.Stage), AdmittedThrough: ro.AdmittedThrough,
			Soaking: d.prevPhase == hubv1alpha1.RolloutSoaking}, in.Members, in.Now)
	}
	if len(d.tally.Stages) != len(d.names) { // a tally of other stages counts nothing here
		d.tally.Stages = make([]StageCount, len(d.names))
	}
	if d.failed() {
		return d.out
	}
	if unknown := d.unknownFailures(); d.prevPhase == hubv1alpha1.RolloutHalted && len(unknown) > 0 {
		ro.Phase = hubv1alpha1.RolloutHalted // until where they stand is known again
		return d.out
	}
	if d.s.Paused {
		ro.Phase = hubv1alpha1.RolloutPaused
		ro.Message = fmt.Sprintf("Paused in stage %s: no member gets revision %d until spec.rollout.paused is false", ro.Stage, u)
		return d.out
	}
	d.progress()
	return d.out
}

// decision is one Decide.
type decision struct {
	in        Input
	s         *hubv1alpha1.RolloutStrategy
	names     []string
	ro        *hubv1alpha1.RolloutStatus
	prevPhase hubv1alpha1.RolloutPhase
	tally     Tally
	out       Decision
}

// startStage makes stage i the current one, from now.
func (d *decision) startStage(i int) {
	now := metav1.NewTime(d.in.Now)
	d.ro.Stage, d.ro.StageStartTime, d.ro.SoakStartTime, d.ro.AdmittedThrough = d.names[i], &now, nil, ""
	d.ro.PassedWhilePaused = nil
	if active, paused := d.stageMembers(i); len(active) > 0 || (len(paused) > 0 && !d.s.SkipPausedStages) {
		// an empty stage, or one of paused members skipped, passes unsaid
		d.event(corev1.EventTypeNormal, hubv1alpha1.StageStartedEvent, d.names[i], "Revision %d: stage %s started", d.in.Update, d.names[i])
	}
}

// event records an Event of the revision in stage.
func (d *decision) event(typ, reason, stage, format string, args ...any) {
	d.out.Events = append(d.out.Events, Event{Type: typ, Reason: reason, Note: fleetbundle.Truncate(fmt.Sprintf(format, args...)),
		Revision: d.in.Update, Stage: stage})
}

// requeue asks for the decision again after wait at the latest.
func (d *decision) requeue(wait time.Duration) {
	if wait > 0 && (d.out.RequeueAfter == 0 || wait < d.out.RequeueAfter) {
		d.out.RequeueAfter = wait
	}
}

// failed halts or rolls back the rollout when more members failed than maxFailures tolerates;
// it reports whether it did.
func (d *decision) failed() bool {
	u, t := d.in.Update, d.tally
	d.out.Failed = t.Failed
	d.requeue(t.RequeueAfter)
	tolerated := scaled(d.s.MaxFailures, d.active(), intstr.FromInt32(0), false)
	if t.FailedCount <= tolerated {
		return false
	}
	names := sortedKeys(t.Failed)
	first := t.Failed[names[0]]
	what := fmt.Sprintf("%d members failed revision %d (maxFailures %d): %s; %s: %s: %s", t.FailedCount, u, tolerated,
		fleetbundle.ListNames(names), first.Cluster, first.Reason, first.Message)
	if t.FailedCount == 1 {
		what = fmt.Sprintf("member %s failed revision %d (maxFailures %d): %s: %s", first.Cluster, u, tolerated, first.Reason, first.Message)
	}
	c := d.in.Status.CurrentRevision
	if d.s.OnFailure == hubv1alpha1.OnFailureRollback && c > 0 {
		d.ro.FailedRevision, d.ro.Phase, d.ro.AdmittedThrough, d.ro.SoakStartTime = u, hubv1alpha1.RolloutRolledBack, "", nil
		d.ro.Message = fleetbundle.Truncate(fmt.Sprintf("Rolled back to revision %d: %s", c, what))
		d.event(corev1.EventTypeWarning, hubv1alpha1.RolledBackEvent, d.ro.Stage, "Revision %d rolled back to revision %d in stage %s: %s", u, c, d.ro.Stage, what)
		return true
	}
	d.ro.Phase, d.ro.SoakStartTime = hubv1alpha1.RolloutHalted, nil
	d.ro.Message = fleetbundle.Truncate(fmt.Sprintf("Halted in stage %s: %s; no further member is updated until the failures clear or the template changes", d.ro.Stage, what))
	if c == 0 && d.s.OnFailure == hubv1alpha1.OnFailureRollback {
		d.ro.Message = fleetbundle.Truncate(fmt.Sprintf("Halted in stage %s (revision %d is the first: nothing to roll back to): %s", d.ro.Stage, u, what))
	}
	if d.prevPhase != hubv1alpha1.RolloutHalted {
		d.event(corev1.EventTypeWarning, hubv1alpha1.RolloutHaltedEvent, d.ro.Stage, "Revision %d halted in stage %s: %s", u, d.ro.Stage, what)
	}
	return true
}

// stageMembers are the members of stage i, sorted by name: those the rollout updates (not
// paused), and the paused ones.
func (d *decision) stageMembers(i int) (active, paused []Member) {
	for _, m := range d.in.Members {
		switch {
		case m.Stage != i:
		case m.Paused:
			paused = append(paused, m)
		default:
			active = append(active, m)
		}
	}
	byName := func(a, b Member) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(active, byName)
	slices.SortFunc(paused, byName)
	return active, paused
}

// lastStage is the stage a complete rollout names: the implicit last one if it has members
// (paused or not), else the last one named.
func (d *decision) lastStage() string {
	last := len(d.names) - 1
	if slices.ContainsFunc(d.in.Members, func(m Member) bool { return m.Stage == last }) {
		return d.names[last]
	}
	return d.names[last-1]
}

// active counts the members the rollout updates: those not paused.
func (d *decision) active() int {
	n := 0
	for _, m := range d.in.Members {
		if !m.Paused {
			n++
		}
	}
	return n
}

// unknownFailures names the members where a halt's failures may be and cannot be seen: members
// the hub is still joining, and failed members (in the status's failedClusters) that are not
// Ready. A halt holds while there are any: only a failure seen to clear lets it go on.
func (d *decision) unknownFailures() []string {
	failed := map[string]bool{}
	for _, f := range d.in.Status.FailedClusters {
		failed[f.Cluster] = true
	}
	var names []string
	for _, m := range d.in.Members {
		if m.Joining || (!m.Ready && !m.Paused && failed[m.Name]) {
			names = append(names, m.Name)
		}
	}
	return names
}

// progress moves the rollout on: it admits members of the current stage up to its
// maxConcurrency, soaks a stage that is done, and starts the next one once the soak passed.
func (d *decision) progress() {
	for i := slices.Index(d.names, d.ro.Stage); d.stageDone(i); i++ {
		if i == len(d.names)-1 {
			d.out.Current = d.in.Update
			d.ro.Phase, d.ro.AdmittedThrough, d.ro.SoakStartTime = hubv1alpha1.RolloutComplete, "", nil
			d.ro.Stage = d.lastStage()
			d.ro.Message = fmt.Sprintf("Revision %d is rolled out", d.in.Update)
			d.event(corev1.EventTypeNormal, hubv1alpha1.RolloutCompleteEvent, d.ro.Stage, "Revision %d is rolled out to every stage", d.in.Update)
			return
		}
		d.startStage(i + 1)
	}
}

// stageDone moves stage i on and reports whether it is done (and soaked): while it requires
// approval and the revision is not approved for it, it admits none of its members; while its members are
// all paused it waits for one to be resumed (unless skipPausedStages); while members of the
// stage are joining it waits for them; while some of its Ready members do not hold the revision
// Ready, it admits more of them; once all do, it soaks. Its paused members are not waited for
// otherwise: they get the revision when resumed.
func (d *decision) stageDone(i int) bool {
	u, stage := d.in.Update, d.names[i]
	members, paused := d.stageMembers(i)
	var eligible int
	var joining []string
	for _, m := range members {
		if m.Ready {
			eligible++
		}
		if m.Joining {
			joining = append(joining, m.Name)
		}
	}
	if len(members) > 0 && d.awaitingApproval(i) {
		return false
	}
	count := d.tally.Stages[i]
	switch done := int(count.Done); {
	case len(members) == 0 && len(paused) > 0 && !d.s.SkipPausedStages:
		// Not passed: no member took the revision. Its soak starts again once they are back.
		d.ro.Phase, d.ro.SoakStartTime = hubv1alpha1.RolloutProgressing, nil
		d.ro.Message = fleetbundle.Truncate(fmt.Sprintf("Stage %s: waiting for paused members %s; resume them or set spec.rollout.skipPausedStages",
			stage, fleetbundle.ListNames(memberNames(paused, false))))
		return false
	case len(joining) > 0:
		if d.ro.Phase != hubv1alpha1.RolloutSoaking {
			d.ro.Phase = hubv1alpha1.RolloutProgressing
		}
		slices.Sort(joining)
		d.ro.Message = fleetbundle.Truncate(fmt.Sprintf("Stage %s: waiting for %s to join", stage, fleetbundle.ListNames(joining)))
		return false
	case len(members) > 0 && eligible == 0:
		d.ro.Phase, d.ro.SoakStartTime = hubv1alpha1.RolloutProgressing, nil
		d.ro.Message = fmt.Sprintf("Stage %s: none of its %d members is Ready; waiting for one to be", stage, len(members))
		return false
	case done < eligible:
		d.admit(i, members, paused, int(count.InFlight))
		d.ro.Phase, d.ro.SoakStartTime = hubv1alpha1.RolloutProgressing, nil
		d.ro.Message = fmt.Sprintf("Stage %s: revision %d is Ready in %d of %d Ready members", stage, u, done, eligible)
		if len(count.Waiting) > 0 {
			d.ro.Message = fleetbundle.Truncate(d.ro.Message + "; waiting for " + fleetbundle.ListNames(count.Waiting))
		}
		return false
	}
	if soak := soakTime(d.s, i); len(members) > 0 && soak > 0 {
		if d.ro.SoakStartTime == nil {
			now := metav1.NewMicroTime(d.in.Now)
			d.ro.SoakStartTime = &now
		}
		if left := d.ro.SoakStartTime.Add(soak).Sub(d.in.Now); left > 0 {
			d.ro.Phase = hubv1alpha1.RolloutSoaking
			d.ro.Message = fmt.Sprintf("Stage %s: revision %d is Ready in all %d Ready members; soaking until %s", stage, u, eligible,
				d.ro.SoakStartTime.Add(soak).UTC().Format(time.RFC3339Nano))
			d.requeue(left)
			return false
		}
	}
	if len(members) > 0 {
		d.event(corev1.EventTypeNormal, hubv1alpha1.StageCompletedEvent, stage, "Revision %d: stage %s completed: %s", u, stage, fleetbundle.ListNames(memberNames(members, true)))
	}
	return true
}

// admit moves admittedThrough on over the stage's members (sorted by name) so that at most the
// stage's maxConcurrency are updated (or admitted) and not yet Ready: each member passed that is
// Ready and does not hold updateRevision takes one of the free places. A member passed while not
// Ready is updated when it is Ready again. One passed while paused is named in
// passedWhilePaused: once resumed it waits for a free place, and takes it before the members
// not passed yet.
func (d *decision) admit(stage int, active, paused []Member, inFlight int) {
	u, listed := d.in.Update, map[string]bool{}
	for _, name := range d.ro.PassedWhilePaused {
		listed[name] = true
	}
	for _, m := range active {
		if listed[m.Name] && m.Ready && m.Held != u {
			inFlight-- // resumed and waiting: counted in flight, as admitted, by the tally
		}
	}
	room := scaled(maxConcurrency(d.s, stage), len(active), intstr.FromString(hubv1alpha1.DefaultMaxConcurrency), true) - inFlight
	members := slices.SortedFunc(slices.Values(slices.Concat(active, paused)), func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	var passed []string
	defer func() { d.ro.PassedWhilePaused = passed }()
	for _, m := range members {
		// waiting: passed while paused, not holding it, and still paused or without a free place
		waiting := listed[m.Name] && m.Held != u && (!m.Ready || room <= 0)
		switch {
		case m.Name <= d.ro.AdmittedThrough && waiting:
			passed = append(passed, m.Name) // still paused, or no free place yet
		case m.Name <= d.ro.AdmittedThrough:
			if listed[m.Name] && m.Held != u {
				room-- // resumed: admitted again
			}
		case room <= 0:
			return
		case m.Paused && m.Held != u:
			if len(passed) == hubv1alpha1.MaxPassedWhilePaused {
				return
			}
			passed = append(passed, m.Name)
			d.ro.AdmittedThrough = m.Name
		default:
			d.ro.AdmittedThrough = m.Name
			if m.Ready && m.Held != u {
				room--
			}
		}
	}
}

// maxConcurrency is stage i's maxConcurrency; nil for the implicit last stage (its default).
func maxConcurrency(s *hubv1alpha1.RolloutStrategy, i int) *intstr.IntOrString {
	if i < len(s.Stages) {
		return s.Stages[i].MaxConcurrency
	}
	return nil
}

// soakTime is stage i's soakTime; 0 for the implicit last stage.
func soakTime(s *hubv1alpha1.RolloutStrategy, i int) time.Duration {
	if i < len(s.Stages) && s.Stages[i].SoakTime != nil {
		return s.Stages[i].SoakTime.Duration
	}
	return 0
}

// progressDeadline is the rollout's progressDeadline, or its default.
func progressDeadline(s *hubv1alpha1.RolloutStrategy) time.Duration {
	if s.ProgressDeadline != nil && s.ProgressDeadline.Duration > 0 {
		return s.ProgressDeadline.Duration
	}
	return hubv1alpha1.DefaultProgressDeadline
}

// scaled resolves a number or "N%" of total (rounded down; at least 1 if atLeastOne), or def if
// v is nil. A value the API server's validation would refuse counts as def.
func scaled(v *intstr.IntOrString, total int, def intstr.IntOrString, atLeastOne bool) int {
	if v == nil {
		v = &def
	}
	n := v.IntValue()
	if v.Type == intstr.String {
		pct, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
		if err != nil || !strings.HasSuffix(v.StrVal, "%") {
			return scaled(nil, total, def, atLeastOne)
		}
		n = total * pct / 100
	}
	if atLeastOne {
		n = max(n, 1)
	}
	return max(n, 0)
}

// memberNames names the members, only the Ready ones if ready.
func memberNames(ms []Member, ready bool) []string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		if m.Ready || !ready {
			names = append(names, m.Name)
		}
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	return keys
}
