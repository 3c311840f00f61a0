package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// The rollout phase: a FleetBundle with a staged rollout over every member, three
// stages (a canary of one member, ring1 of up to five, rest), each soaking cfg.RolloutSoak. It
// times clean rollouts against the sum of their soak times, the hub's reaction to the canary's
// failure (Halt, then Rollback), and counts the hub's writes of the placed bundle per member and
// revision from the members' audit logs.
const (
	// rolloutNS holds the FleetBundle on the hub, and so its placed bundles in the members.
	rolloutNS = "rollout"
	// rolloutName is the FleetBundle, its placed ConfigBundles and their ConfigMaps.
	rolloutName = "ro"
	// rolloutLabel selects the members (not the black holes); ringLabel puts them in stages.
	rolloutLabel, ringLabel = "bench-rollout", "bench-ring"
	// badPrefix starts the messages the canary's ValidatingAdmissionPolicy refuses.
	badPrefix = "bad "
	// rolloutTimeout bounds the wait for one rollout or failure.
	rolloutTimeout = 2 * time.Minute
	// rolloutSettle is how long after a rollout its writes are still counted.
	rolloutSettle = 2 * time.Second
	// Goals: overhead per stage, and the canary's failure to Halted.
	goalRolloutOverheadPerStage = time.Second
	goalHaltAfter               = time.Second
)

// rolloutStage is a stage of the benchmark's FleetBundle and its members.
type rolloutStage struct {
	Name    string
	Members []string
}

// rolloutRun is one revision's rollout: the clean ones (Complete) and the failed ones (Halted,
// RolledBack).
type rolloutRun struct {
	What     string
	Revision int64
	// Start is when the hub API server acknowledged the write of the FleetBundle; End when the
	// benchmark saw the run's outcome (Complete, or the end of the window after a failure).
	Start, End time.Time
	// Total is Start to phase Complete seen (clean runs).
	Total time.Duration
	// Updated are, per stage, the first and last time (from Start) a member's placed bundle was
	// seen holding Revision; zero if none was.
	Updated [][2]time.Duration
	// Writes are the hub's successful writes of the placed ConfigBundle (not its status) in each
	// member within [Start, End+rolloutSettle); Refused the refused ones; Want what the contract
	// asks for, per member.
	Writes, Want map[string]int
	Refused      int
	// Soaks are, per stage (clean runs), the time from its last member seen Ready at Revision to
	// the next stage's first member seen updated (the last stage: to Complete seen): the soak
	// the hub kept, seen from the benchmark's watches. Zero if not measured.
	Soaks []time.Duration
}

// soakSkew is how much shorter than soakTime a soak seen through two watches may look: their
// delivery times differ by a few milliseconds.
const soakSkew = 50 * time.Millisecond

// shortSoaks names the stages whose soak looked shorter than soak, with the soak seen.
func (run *rolloutRun) shortSoaks(rr *rolloutResults) []string {
	var short []string
	for i, d := range run.Soaks {
		if d > 0 && d < rr.Soak-soakSkew {
			short = append(short, fmt.Sprintf("%s %s", rr.Stages[i].Name, secs(d)))
		}
	}
	return short
}

// rolloutResults are the figures of the rollout phase.
type rolloutResults struct {
	Members int
	Soak    time.Duration
	Stages  []rolloutStage
	Runs    []*rolloutRun
	// HaltAfter is the canary's placed bundle seen Ready=False at the bad revision -> phase
	// Halted seen on the hub; RolledBackAfter the same -> phase RolledBack, CanaryRestoredAfter
	// -> every canary holding currentRevision again, CanaryReadyAfter -> Ready there again.
	HaltAfter, RolledBackAfter, CanaryRestoredAfter, CanaryReadyAfter time.Duration
	// Leaks name members outside the canary seen holding a failed revision.
	Leaks []string
	// Window is how long after the failure the other members were watched.
	Window time.Duration
}

func (rr *rolloutResults) soakSum() time.Duration { return time.Duration(len(rr.Stages)) * rr.Soak }

// rolloutStages splits the members: the first is the canary, the next up to five (at most half
// of the others) ring1, the others rest.
func rolloutStages(names []string) []rolloutStage {
	ring1 := min(5, (len(names)-1)/2)
	return []rolloutStage{
		{Name: "canary", Members: names[:1]},
		{Name: "ring1", Members: names[1 : 1+ring1]},
		{Name: "rest", Members: names[1+ring1:]},
	}
}

// measureRollout runs the rollout phase; it removes what it created.
func (f *fleet) measureRollout(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	if cfg.RolloutSoak <= 0 {
		return nil
	}
	if f.hub() == nil {
		say("rollout: starting the hub, waiting until it has caught up with the fleet")
		if err := f.restartHub(ctx, cfg); err != nil {
			return err
		}
	}
	pm := f.Members()
	if len(pm) < 3 {
		return fmt.Errorf("the rollout phase needs 3 members at least, not %d", len(pm))
	}
	names := make([]string, 0, len(pm))
	for _, m := range pm {
		names = append(names, m.Name)
	}
	rr := &res.Rollout
	rr.Members, rr.Soak, rr.Stages = len(pm), cfg.RolloutSoak, rolloutStages(names)
	rr.Window = cfg.RolloutSoak + 2*time.Second
	if err := f.prepareRollout(ctx, rr); err != nil {
		return err
	}
	fbs := watchFleetBundles(ctx, f.Hub)
	defer fbs.stop()
	bundles := watchPlacedBundles(ctx, pm)
	defer bundles.stop()
	canary := f.Member(rr.Stages[0].Members[0])
	err := f.rolloutRuns(ctx, rr, fbs, bundles, canary, say)
	if err == nil {
		say("rollout: counting the hub's writes of the placed bundle from the members' audit logs")
		err = f.countRolloutWrites(ctx, rr)
	}
	say("rollout: removing the FleetBundle, the policy and the labels")
	return errors.Join(err, f.cleanupRollout(ctx, canary))
}

// rolloutRuns makes the phase's five revisions: a first placement and a template change, both
// clean; a value the canary refuses (Halt); a fix; then, with onFailure Rollback, another
// refused value.
func (f *fleet) rolloutRuns(ctx context.Context, rr *rolloutResults, fbs *fbWatch, bundles *bundleWatch, canary *member, say func(string, ...any)) error {
	stages := rr.Stages
	say("rollout: first placement, %d members in stages %s, soakTime %s each", rr.Members, stageSizes(stages), rr.Soak)
	run, err := f.cleanRollout(ctx, rr, fbs, bundles, "first placement (create)", "rollout 1", true)
	if err != nil {
		return err
	}
	rr.Runs = append(rr.Runs, run)
	say("rollout: template change")
	if run, err = f.cleanRollout(ctx, rr, fbs, bundles, "template change", "rollout 2", false); err != nil {
		return err
	}
	rr.Runs = append(rr.Runs, run)

	say("rollout: a ValidatingAdmissionPolicy in %s (the canary) refuses messages starting %q; a template change to one (onFailure Halt)", canary.Name, badPrefix)
	if err := refuseBadMessages(ctx, canary.Client); err != nil {
		return err
	}
	if run, rr.HaltAfter, err = f.failedRollout(ctx, rr, fbs, bundles, "refused by the canary, onFailure Halt", badPrefix+"3", hubv1alpha1.RolloutHalted); err != nil {
		return err
	}
	rr.Runs = append(rr.Runs, run)

	say("rollout: a fixed template rolls out")
	if run, err = f.cleanRollout(ctx, rr, fbs, bundles, "fix after the halt", "rollout 4", false); err != nil {
		return err
	}
	rr.Runs = append(rr.Runs, run)

	say("rollout: onFailure Rollback, and a template change the canary refuses")
	if err := f.patchRollout(ctx, `{"spec":{"rollout":{"onFailure":"Rollback"}}}`); err != nil {
		return err
	}
	previous := run.Revision
	if run, rr.RolledBackAfter, err = f.failedRollout(ctx, rr, fbs, bundles, "refused by the canary, onFailure Rollback", badPrefix+"5", hubv1alpha1.RolloutRolledBack); err != nil {
		return err
	}
	rr.Runs = append(rr.Runs, run)
	failedAt, err := bundles.first(run.Start, canary.Name, func(b placedBundle) bool { return b.Revision == run.Revision && b.failed() })
	if err != nil {
		return err
	}
	restored, err := bundles.first(failedAt, canary.Name, func(b placedBundle) bool { return b.Revision == previous })
	if err != nil {
		return fmt.Errorf("the canary never got revision %d back: %w", previous, err)
	}
	ready, err := bundles.first(restored, canary.Name, func(b placedBundle) bool { return b.Revision == previous && b.ready() })
	if err != nil {
		return fmt.Errorf("the canary's bundle is not Ready at revision %d again: %w", previous, err)
	}
	rr.CanaryRestoredAfter, rr.CanaryReadyAfter = restored.Sub(failedAt), ready.Sub(failedAt)
	run.Want[canary.Name] = 2 // the failed revision, then the previous one back
	return nil
}

func stageSizes(stages []rolloutStage) string {
	parts := make([]string, 0, len(stages))
	for _, s := range stages {
		parts = append(parts, fmt.Sprintf("%s %d", s.Name, len(s.Members)))
	}
	return strings.Join(parts, ", ")
}

// prepareRollout creates the namespaces (on the hub, with the ClusterSet global bound into it,
// and in every member: the hub creates none) and labels the MemberClusters: every one
// rolloutLabel, those of the named stages ringLabel.
func (f *fleet) prepareRollout(ctx context.Context, rr *rolloutResults) error {
	if err := f.BindGlobal(ctx, rolloutNS); err != nil {
		return err
	}
	for i, s := range rr.Stages {
		for _, name := range s.Members {
			if err := fixture.EnsureNamespace(ctx, f.Member(name).Client, rolloutNS); err != nil {
				return err
			}
			labels := map[string]string{rolloutLabel: "true"}
			if i < len(rr.Stages)-1 {
				labels[ringLabel] = s.Name
			}
			if err := f.LabelMember(ctx, name, labels); err != nil {
				return err
			}
		}
	}
	return nil
}

// newRolloutFleetBundle selects every member of the benchmark, in the stages of rr.
func newRolloutFleetBundle(rr *rolloutResults, message string) *hubv1alpha1.FleetBundle {
	fb := fixture.NewFleetBundle(rolloutNS, rolloutName, map[string]string{rolloutLabel: "true"}, configbundlev1alpha1.ConfigBundleSpec{Message: message})
	soak := &metav1.Duration{Duration: rr.Soak}
	ro := &hubv1alpha1.RolloutStrategy{OnFailure: hubv1alpha1.OnFailureHalt}
	for i, s := range rr.Stages {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{ringLabel: s.Name}}
		if i == len(rr.Stages)-1 {
			sel = &metav1.LabelSelector{} // every member left
		}
		ro.Stages = append(ro.Stages, hubv1alpha1.RolloutStage{Name: s.Name, ClusterSelector: sel, SoakTime: soak})
	}
	fb.Spec.Rollout = ro
	return fb
}

// writeTemplate creates the FleetBundle with message, or patches its template's message, and
// returns when the hub API server acknowledged it, and the FleetBundle's generation then.
func (f *fleet) writeTemplate(ctx context.Context, rr *rolloutResults, message string, create bool) (time.Time, int64, error) {
	if create {
		fb := newRolloutFleetBundle(rr, message)
		if err := f.Hub.Create(ctx, fb); err != nil {
			return time.Time{}, 0, err
		}
		return time.Now(), fb.Generation, nil
	}
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Name: rolloutName, Namespace: rolloutNS}}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"message":%q}}}}`, message)
	if err := f.Hub.Patch(ctx, fb, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return time.Time{}, 0, err
	}
	return time.Now(), fb.Generation, nil
}

func (f *fleet) patchRollout(ctx context.Context, patch string) error {
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Name: rolloutName, Namespace: rolloutNS}}
	return f.Hub.Patch(ctx, fb, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// revisionOf waits until the status was computed for generation, and returns its updateRevision.
func revisionOf(ctx context.Context, fbs *fbWatch, from time.Time, generation int64) (int64, error) {
	var rev int64
	_, err := fbs.wait(ctx, from, func(s fbStatus) bool {
		rev = s.UpdateRevision
		return s.ObservedGeneration >= generation && s.UpdateRevision > 0
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the status of generation %d: %w", generation, err)
	}
	return rev, nil
}

// cleanRollout writes message and times its rollout until the hub reports it Complete.
func (f *fleet) cleanRollout(ctx context.Context, rr *rolloutResults, fbs *fbWatch, bundles *bundleWatch, what, message string, create bool) (*rolloutRun, error) {
	start, gen, err := f.writeTemplate(ctx, rr, message, create)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	run := &rolloutRun{What: what, Start: start, Want: map[string]int{}}
	if run.Revision, err = revisionOf(ctx, fbs, start, gen); err != nil {
		return nil, err
	}
	done, err := fbs.wait(ctx, start, func(s fbStatus) bool {
		return s.CurrentRevision == run.Revision && s.Phase == hubv1alpha1.RolloutComplete
	})
	if err != nil {
		return nil, fmt.Errorf("%s: waiting for revision %d to be Complete: %w (last status: %s)", what, run.Revision, err, fbs.last())
	}
	run.End, run.Total = done, done.Sub(start)
	for _, s := range rr.Stages {
		for _, name := range s.Members {
			run.Want[name] = 1
		}
	}
	var readyAt []time.Time
	run.Updated, readyAt = bundles.stageTimes(rr, run.Start, run.Revision)
	run.Soaks = make([]time.Duration, len(rr.Stages))
	for i := range rr.Stages {
		end := done
		if i+1 < len(rr.Stages) {
			end = start.Add(run.Updated[i+1][0])
		}
		if !readyAt[i].IsZero() && run.Updated[min(i+1, len(rr.Stages)-1)] != [2]time.Duration{} {
			run.Soaks[i] = end.Sub(readyAt[i])
		}
	}
	return run, nil
}

// failedRollout writes a message the canary refuses and waits until the hub reports phase, then
// watches the other members for rr.Window. It returns the time from the canary's failure (its
// placed bundle seen Ready=False at the new revision) to phase seen on the hub.
func (f *fleet) failedRollout(ctx context.Context, rr *rolloutResults, fbs *fbWatch, bundles *bundleWatch, what, message string, phase hubv1alpha1.RolloutPhase) (*rolloutRun, time.Duration, error) {
	start, gen, err := f.writeTemplate(ctx, rr, message, false)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	canary := rr.Stages[0].Members[0]
	run := &rolloutRun{What: what, Start: start, Want: map[string]int{canary: 1}}
	if run.Revision, err = revisionOf(ctx, fbs, start, gen); err != nil {
		return nil, 0, err
	}
	failedAt, err := bundles.first(start, canary, func(b placedBundle) bool { return b.Revision == run.Revision && b.failed() })
	if err != nil {
		return nil, 0, fmt.Errorf("%s: the canary's bundle never failed at revision %d: %w", what, run.Revision, err)
	}
	stopped, err := fbs.wait(ctx, start, func(s fbStatus) bool { return s.UpdateRevision == run.Revision && s.Phase == phase })
	if err != nil {
		return nil, 0, fmt.Errorf("%s: waiting for phase %s: %w (last status: %s)", what, phase, err, fbs.last())
	}
	if err := sleepCtx(ctx, time.Until(stopped.Add(rr.Window))); err != nil {
		return nil, 0, err
	}
	run.End = time.Now()
	for _, s := range rr.Stages {
		for _, name := range s.Members {
			if name == canary {
				continue
			}
			if _, ok := bundles.firstNow(start, name, func(b placedBundle) bool { return b.Revision == run.Revision }); ok {
				rr.Leaks = append(rr.Leaks, fmt.Sprintf("%s (revision %d)", name, run.Revision))
			}
		}
	}
	run.Updated, _ = bundles.stageTimes(rr, run.Start, run.Revision)
	return run, stopped.Sub(failedAt), nil
}

// countRolloutWrites counts, for every run, the hub's writes of the placed ConfigBundle in each
// member from the run's start to rolloutSettle after its end.
func (f *fleet) countRolloutWrites(ctx context.Context, rr *rolloutResults) error {
	if err := sleepCtx(ctx, rolloutSettle+auditGrace); err != nil {
		return err
	}
	all, err := f.servedWrites()
	if err != nil {
		return err
	}
	for i, run := range rr.Runs {
		to := run.End.Add(rolloutSettle)
		if i+1 < len(rr.Runs) && rr.Runs[i+1].Start.Before(to) {
			to = rr.Runs[i+1].Start
		}
		run.Writes = map[string]int{}
		for _, w := range hubWritesIn(all, run.Start, to) {
			if w.Plane == hubPlane || w.Resource != "configbundles" || w.Subresource != "" || w.Namespace != rolloutNS || w.Name != rolloutName {
				continue
			}
			if w.Code >= 300 {
				run.Refused++
				continue
			}
			run.Writes[w.Plane]++
		}
	}
	return nil
}

// cleanupRollout deletes the canary's policy, the FleetBundle (waiting until it is gone, and so
// its placed bundles) and the members' labels.
func (f *fleet) cleanupRollout(ctx context.Context, canary *member) error {
	policy, binding := badMessagePolicy()
	errs := []error{client.IgnoreNotFound(canary.Client.Delete(ctx, binding)), client.IgnoreNotFound(canary.Client.Delete(ctx, policy))}
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Name: rolloutName, Namespace: rolloutNS}}
	if err := client.IgnoreNotFound(f.Hub.Delete(ctx, fb)); err != nil {
		return errors.Join(append(errs, err)...)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(f.Hub.Get(ctx, client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{})), nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("waiting for the FleetBundle %s/%s to be deleted: %w", rolloutNS, rolloutName, err))
	}
	for _, m := range f.Members() {
		errs = append(errs, f.LabelMember(ctx, m.Name, map[string]string{rolloutLabel: "", ringLabel: ""}))
	}
	return errors.Join(errs...)
}

// badMessagePolicy is a ValidatingAdmissionPolicy and its binding that refuse (Forbidden) a
// ConfigMap of rolloutNS whose message starts with badPrefix: what a member's own admission
// control does with a value it does not accept.
func badMessagePolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	const name = "bench-refuse-bad-messages"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: rolloutNS}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.data) || !(%q in object.data) || !object.data[%q].startsWith(%q)",
					configbundlev1alpha1.MessageKey, configbundlev1alpha1.MessageKey, badPrefix),
				Message: "this member refuses messages starting " + strconv.Quote(badPrefix),
				Reason:  ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}

// refuseBadMessages installs badMessagePolicy with c, and returns once it is in force: the API
// server loads policies asynchronously, so dry-run creates probe it.
func refuseBadMessages(ctx context.Context, c client.Client) error {
	policy, binding := badMessagePolicy()
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	probe := func(message string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rolloutNS, Name: "bench-policy-probe"},
			Data: map[string]string{configbundlev1alpha1.MessageKey: message}}
		return c.Create(ctx, cm, client.DryRunAll)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return apierrors.IsForbidden(probe(badPrefix + "probe")), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the policy to refuse messages starting %q: %w", badPrefix, err)
	}
	return probe("good probe")
}

// fbStatus is what the benchmark reads of the FleetBundle's status.
type fbStatus struct {
	Generation, ObservedGeneration, CurrentRevision, UpdateRevision, FailedRevision int64
	Stage                                                                           string
	Phase                                                                           hubv1alpha1.RolloutPhase
}

func (s fbStatus) String() string {
	return fmt.Sprintf("generation %d/%d, revisions current %d update %d failed %d, stage %q, phase %q",
		s.ObservedGeneration, s.Generation, s.CurrentRevision, s.UpdateRevision, s.FailedRevision, s.Stage, s.Phase)
}

// placedBundle is what the benchmark reads of a placed ConfigBundle.
type placedBundle struct {
	Revision int64
	// Current: status.observedGeneration is the generation; Ready the Ready condition's status.
	Current bool
	Ready   metav1.ConditionStatus
}

func (b placedBundle) failed() bool { return b.Current && b.Ready == metav1.ConditionFalse }
func (b placedBundle) ready() bool  { return b.Current && b.Ready == metav1.ConditionTrue }

// observation is a value seen on a watch, when, and whose (a member's name, or "").
type observation[T any] struct {
	At  time.Time
	Key string
	V   T
}

// observer records what watches see, in order, and lets a caller wait for the first observation
// that satisfies a condition.
type observer[T any] struct {
	mu      sync.Mutex
	obs     []observation[T]
	changed chan struct{}
	stops   []context.CancelFunc
}

func newObserver[T any]() *observer[T] { return &observer[T]{changed: make(chan struct{})} }

func (o *observer[T]) add(key string, v T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation[T]{At: time.Now(), Key: key, V: v})
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *observer[T]) stop() {
	for _, stop := range o.stops {
		stop()
	}
}

// firstNow returns the first observation of key (any key if "") since from that satisfies cond,
// among those made so far.
func (o *observer[T]) firstNow(from time.Time, key string, cond func(T) bool) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ob := range o.obs {
		if !ob.At.Before(from) && (key == "" || ob.Key == key) && cond(ob.V) {
			return ob.At, true
		}
	}
	return time.Time{}, false
}

// first waits up to rolloutTimeout for firstNow to find an observation.
func (o *observer[T]) first(from time.Time, key string, cond func(T) bool) (time.Time, error) {
	timeout := time.After(rolloutTimeout)
	for {
		o.mu.Lock()
		changed := o.changed
		o.mu.Unlock()
		if at, ok := o.firstNow(from, key, cond); ok {
			return at, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return time.Time{}, fmt.Errorf("not seen within %s", rolloutTimeout)
		}
	}
}

// watchLoop lists then watches list's objects in ns with c, again whenever the watch ends, until
// the returned cancel, handing each object to seen.
func watchLoop(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, seen func(client.Object)) context.CancelFunc {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for ctx.Err() == nil {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				_ = sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
			_ = meta.EachListItem(l, func(o runtime.Object) error {
				if obj, ok := o.(client.Object); ok {
					seen(obj)
				}
				return nil
			})
			w, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})
			if err != nil {
				_ = sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if obj, ok := ev.Object.(client.Object); ok && ev.Type != watch.Deleted && ev.Type != watch.Error {
					seen(obj)
				}
			}
			w.Stop()
		}
	}()
	return cancel
}

// fbWatch observes the benchmark's FleetBundle's status on the hub.
type fbWatch struct{ *observer[fbStatus] }

func watchFleetBundles(ctx context.Context, hub client.WithWatch) *fbWatch {
	o := newObserver[fbStatus]()
	o.stops = append(o.stops, watchLoop(ctx, hub, &hubv1alpha1.FleetBundleList{}, rolloutNS, func(obj client.Object) {
		fb, ok := obj.(*hubv1alpha1.FleetBundle)
		if !ok || fb.Name != rolloutName {
			return
		}
		s := fbStatus{Generation: fb.Generation, ObservedGeneration: fb.Status.ObservedGeneration,
			CurrentRevision: fb.Status.CurrentRevision, UpdateRevision: fb.Status.UpdateRevision}
		if ro := fb.Status.Rollout; ro != nil {
			s.Stage, s.Phase, s.FailedRevision = ro.Stage, ro.Phase, ro.FailedRevision
		}
		o.add("", s)
	}))
	return &fbWatch{o}
}

// wait waits for the first status since from that satisfies cond.
func (w *fbWatch) wait(_ context.Context, from time.Time, cond func(fbStatus) bool) (time.Time, error) {
	return w.first(from, "", cond)
}

// last renders the last status seen.
func (w *fbWatch) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.obs) == 0 {
		return "none"
	}
	return w.obs[len(w.obs)-1].V.String()
}

// bundleWatch observes the placed ConfigBundles in the members.
type bundleWatch struct{ *observer[placedBundle] }

func watchPlacedBundles(ctx context.Context, pm []*member) *bundleWatch {
	o := newObserver[placedBundle]()
	for _, m := range pm {
		name := m.Name
		o.stops = append(o.stops, watchLoop(ctx, m.Client, &configbundlev1alpha1.ConfigBundleList{}, rolloutNS, func(obj client.Object) {
			b, ok := obj.(*configbundlev1alpha1.ConfigBundle)
			if !ok || b.Name != rolloutName {
				return
			}
			rev, _ := strconv.ParseInt(b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation], 10, 64)
			pb := placedBundle{Revision: rev, Current: b.Status.ObservedGeneration == b.Generation, Ready: metav1.ConditionUnknown}
			if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil {
				pb.Ready = c.Status
			}
			o.add(name, pb)
		}))
	}
	return &bundleWatch{o}
}

// stageTimes returns, per stage of rr, the first and last time (from start) one of its members
// was seen holding revision (zero if none was), and when the last of them was first seen holding
// it Ready (zero unless every one was).
func (w *bundleWatch) stageTimes(rr *rolloutResults, start time.Time, revision int64) ([][2]time.Duration, []time.Time) {
	out, readyAt := make([][2]time.Duration, len(rr.Stages)), make([]time.Time, len(rr.Stages))
	for i, s := range rr.Stages {
		var first, last, ready time.Time
		allReady := true
		for _, name := range s.Members {
			at, ok := w.firstNow(start, name, func(b placedBundle) bool { return b.Revision == revision })
			if !ok {
				allReady = false
				continue
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
			r, ok := w.firstNow(start, name, func(b placedBundle) bool { return b.Revision == revision && b.ready() })
			allReady = allReady && ok
			if r.After(ready) {
				ready = r
			}
		}
		if !first.IsZero() {
			out[i] = [2]time.Duration{first.Sub(start), last.Sub(start)}
		}
		if allReady {
			readyAt[i] = ready
		}
	}
	return out, readyAt
}

// missedGoals names the rollout goals this run missed, with the figure that missed.
func (rr *rolloutResults) missedGoals() []string {
	var missed []string
	for _, run := range rr.Runs {
		if run.Total > 0 {
			if per := (run.Total - rr.soakSum()) / time.Duration(len(rr.Stages)); per > goalRolloutOverheadPerStage {
				missed = append(missed, fmt.Sprintf("%s: at most %s of overhead per stage (%s)", run.What, goalRolloutOverheadPerStage, secs(per)))
			}
		}
		if short := run.shortSoaks(rr); len(short) > 0 {
			missed = append(missed, fmt.Sprintf("%s: every stage soaks its soakTime, %s (%s)", run.What, rr.Soak, strings.Join(short, ", ")))
		}
		if bad := run.wrongWrites(); len(bad) > 0 {
			missed = append(missed, fmt.Sprintf("%s: writes of the placed bundle as the contract says (%s)", run.What, strings.Join(bad, ", ")))
		}
	}
	if rr.HaltAfter >= goalHaltAfter {
		missed = append(missed, fmt.Sprintf("the canary's failure to Halted under %s (%s)", goalHaltAfter, ms(rr.HaltAfter)))
	}
	if len(rr.Leaks) > 0 {
		missed = append(missed, "no member outside the canary gets a failed revision ("+strings.Join(rr.Leaks, ", ")+")")
	}
	return missed
}

// wrongWrites names the members whose writes differ from the contract's, "member got/want".
func (run *rolloutRun) wrongWrites() []string {
	var bad []string
	names := map[string]bool{}
	for n := range run.Want {
		names[n] = true
	}
	for n := range run.Writes {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if run.Writes[n] != run.Want[n] {
			bad = append(bad, fmt.Sprintf("%s %d/%d", n, run.Writes[n], run.Want[n]))
		}
	}
	return bad
}

// writeSummary renders the run's writes: how many members got how many writes, and the members
// of the stages not reached.
func (run *rolloutRun) writeSummary(rr *rolloutResults) (written string, notReached string) {
	counts := map[int]int{}
	reached := map[string]bool{}
	for n, c := range run.Writes {
		if c > 0 {
			counts[c]++
			reached[n] = true
		}
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d member(s) x %d", counts[c], c))
	}
	written = strings.Join(parts, ", ")
	if written == "" {
		written = "none"
	}
	others, writes := 0, 0
	for _, s := range rr.Stages {
		for _, n := range s.Members {
			if run.Want[n] == 0 {
				others++
				writes += run.Writes[n]
			}
		}
	}
	if others == 0 {
		return written, "-"
	}
	return written, fmt.Sprintf("%d writes to %d members", writes, others)
}

func (r *results) printRollout(p printer, cfg benchConfig) {
	rr := &r.Rollout
	if cfg.RolloutSoak <= 0 || len(rr.Runs) == 0 {
		return
	}
	p("\n7. Staged rollout: a FleetBundle over %d members in %d stages (%s), soakTime %s each (sum %s); times from the FleetBundle write's acknowledgement, members seen through watches",
		rr.Members, len(rr.Stages), stageSizes(rr.Stages), rr.Soak, rr.soakSum())
	header := "| revision | rollout | Complete after | overhead (total - soaks) | per stage |"
	sep := "|---|---|---|---|---|"
	for _, s := range rr.Stages {
		header += fmt.Sprintf(" %s updated |", s.Name)
		sep += "---|"
	}
	p("%s", header)
	p("%s", sep)
	for _, run := range rr.Runs {
		total, over, per := "-", "-", "-"
		if run.Total > 0 {
			d := run.Total - rr.soakSum()
			total, over, per = secs(run.Total), secs(d), secs(d/time.Duration(len(rr.Stages)))
		}
		row := fmt.Sprintf("| %d | %s | %s | %s | %s |", run.Revision, run.What, total, over, per)
		for i, u := range run.Updated {
			switch {
			case u == [2]time.Duration{}:
				row += " not updated"
			case u[0] == u[1]:
				row += fmt.Sprintf(" +%s", secs(u[0]))
			default:
				row += fmt.Sprintf(" +%s..+%s", secs(u[0]), secs(u[1]))
			}
			if i < len(run.Soaks) && run.Soaks[i] > 0 {
				row += fmt.Sprintf(", soaked %s", secs(run.Soaks[i]))
			}
			row += " |"
		}
		p("%s", row)
	}
	p("(updated: when the stage's members were first seen holding the revision; soaked: from its last member seen Ready at the revision to the next stage's first seen updated, or to Complete seen: at least soakTime, %s, if the hub keeps it)", rr.Soak)
	rr.printFailuresAndWrites(p)
}

// printFailuresAndWrites prints the rollout phase's failure timings, the hub's writes per member
// and revision, and the goals missed.
func (rr *rolloutResults) printFailuresAndWrites(p printer) {
	p("\nthe canary's failure (its placed bundle seen Ready=False at the new revision) -> Halted seen on the hub: %s (goal under %s); -> RolledBack (onFailure Rollback): %s; -> the canary holding the previous revision again: %s, Ready again: %s",
		ms(rr.HaltAfter), goalHaltAfter, ms(rr.RolledBackAfter), ms(rr.CanaryRestoredAfter), ms(rr.CanaryReadyAfter))
	leaks := "none"
	if len(rr.Leaks) > 0 {
		leaks = strings.Join(rr.Leaks, ", ")
	}
	p("members outside the canary seen holding a failed revision (watched for %s after each failure, the soak + 2 s): %s", rr.Window, leaks)
	p("\n| revision | rollout | hub writes of the placed bundle per member (API servers) | to members of stages not reached | refused | as the contract says |")
	p("|---|---|---|---|---|---|")
	for _, run := range rr.Runs {
		written, notReached := run.writeSummary(rr)
		verdict := "yes"
		if bad := run.wrongWrites(); len(bad) > 0 {
			verdict = "no: " + strings.Join(bad, ", ")
		}
		p("| %d | %s | %s | %s | %d | %s |", run.Revision, run.What, written, notReached, run.Refused, verdict)
	}
	if missed := rr.missedGoals(); len(missed) > 0 {
		p("rollout goals missed: %s", strings.Join(missed, "; "))
	} else {
		p("rollout goals missed: none (at most %s of overhead per stage; Halted under %s after the canary's failure; 1 write per member per revision, 1 more per rolled-back member, 0 to stages not reached)",
			goalRolloutOverheadPerStage, goalHaltAfter)
	}
}

// secs renders a duration in seconds, to the millisecond.
func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
