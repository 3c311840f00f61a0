package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// The rollout tests (issue 23) run on members of their own, ro1 to ro5: regular control planes
// (ro1 runs a ValidatingAdmissionPolicy in some tests) whose API servers log every write, so
// that a test counts, in each member, the hub's writes of the placed bundle and when they
// landed. The first rollout test that runs starts them; each test joins the ones it uses and
// makes them leave when it ends, so that the rest of the suite never sees them.
var rolloutMemberNames = []string{"ro1", "ro2", "ro3", "ro4", "ro5"}

const (
	// ringLabel puts a rollout member in a stage: canary, or rest.
	ringLabel = "e2e.rollout/ring"
	// rolloutTimeout bounds a wait that includes soaks and the reconciler's back-off (its base
	// delay is 3 s, doubling).
	rolloutTimeout = 45 * time.Second
)

// rolloutSet starts the rollout members once, for the tests that use them.
var rolloutSet = &auditedMembers{kind: "rollout", names: rolloutMemberNames}

// rolloutMembers starts the rollout members (once), joins those named and makes them leave when
// the test ends (after the test's other cleanups: its FleetBundle is gone by then).
func rolloutMembers(t *testing.T, names ...string) {
	t.Helper()
	rolloutSet.join(t, names...)
}

// rolloutFixture joins ro1, ro2 and ro3, creates namespace ns in each, selects them by key=yes
// and puts ro1 in ring canary, ro2 and ro3 in ring rest.
func rolloutFixture(t *testing.T, ns, key string) {
	t.Helper()
	g := NewWithT(t)
	rolloutMembers(t, "ro1", "ro2", "ro3")
	for _, m := range []string{"ro1", "ro2", "ro3"} {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	selectMember(t, "ro1", ringLabel, "canary")
	selectMember(t, "ro2", ringLabel, "rest")
	selectMember(t, "ro3", ringLabel, "rest")
}

// stage returns a stage of a rollout selecting the members of ring (all the selected members
// left with ring ""), with soakTime soak.
func stage(name, ring string, soak time.Duration) hubv1alpha1.RolloutStage {
	s := hubv1alpha1.RolloutStage{Name: name, ClusterSelector: &metav1.LabelSelector{}, SoakTime: &metav1.Duration{Duration: soak}}
	if ring != "" {
		s.ClusterSelector.MatchLabels = map[string]string{ringLabel: ring}
	}
	return s
}

// canaryThenRest is a rollout of two stages: canary (ring canary), soaking soak, then rest
// (every selected member left).
func canaryThenRest(soak time.Duration) *hubv1alpha1.RolloutStrategy {
	return &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{stage("canary", "canary", soak), stage("rest", "", 0)}}
}

// newRolloutBundle creates FleetBundle ns/web selecting members by key=yes, with message and
// rollout (nil: none), and deletes it (waiting until it is gone) when the test ends.
func newRolloutBundle(t *testing.T, ns, key, message string, rollout *hubv1alpha1.RolloutStrategy, historyLimit *int32) *hubv1alpha1.FleetBundle {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	fl.MustBindGlobal(t, ns) // the namespace, and the ClusterSet global bound into it: its FleetBundles may place anywhere
	fb := fleet.NewFleetBundle(ns, "web", map[string]string{key: "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: message})
	fb.Spec.Rollout = rollout
	fb.Spec.RevisionHistoryLimit = historyLimit
	g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(g, fb) })
	return fb
}

// editFleetBundle changes a FleetBundle's spec with edit, again on a conflict.
func editFleetBundle(g Gomega, fb *hubv1alpha1.FleetBundle, edit func(*hubv1alpha1.FleetBundleSpec)) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &hubv1alpha1.FleetBundle{}
		if err := fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got); err != nil {
			return err
		}
		edit(&got.Spec)
		return fl.Hub.Update(context.Background(), got)
	})).To(Succeed())
}

// placedThenStaged places FleetBundle ns/web with message v1 at once in the members (no rollout
// yet: fast), then gives it rollout and waits until the rollout of revision 1 reads Complete.
func placedThenStaged(t *testing.T, ns, key string, rollout *hubv1alpha1.RolloutStrategy, members ...string) *hubv1alpha1.FleetBundle {
	t.Helper()
	g := NewWithT(t)
	fb := newRolloutBundle(t, ns, key, "v1", nil, nil)
	everywhere(g, fb, "v1", members...)
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout = rollout })
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		rolloutPhase(hubv1alpha1.RolloutComplete), revisions(1, 1), condition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason)))
	return fb
}

// condition matches a FleetBundle status whose condition typ has status and reason, and is of
// the status's observed generation.
func condition(typ string, status metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(s hubv1alpha1.FleetBundleStatus) string {
		c := meta.FindStatusCondition(s.Conditions, typ)
		if c == nil {
			return "no " + typ
		}
		return fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason)
	}, Equal(fmt.Sprintf("%s=%s/%s", typ, status, reason)))
}

// rolloutPhase matches a FleetBundle status whose status.rollout.phase is phase.
func rolloutPhase(phase hubv1alpha1.RolloutPhase) OmegaMatcher {
	return WithTransform(func(s hubv1alpha1.FleetBundleStatus) hubv1alpha1.RolloutPhase {
		if s.Rollout == nil {
			return "<no status.rollout>"
		}
		return s.Rollout.Phase
	}, Equal(phase))
}

// revisions matches a FleetBundle status with currentRevision and updateRevision.
func revisions(current, update int64) OmegaMatcher {
	return And(HaveField("CurrentRevision", current), HaveField("UpdateRevision", update))
}

// halted matches the status of a rollout halted by failures.
func halted() OmegaMatcher {
	return And(rolloutPhase(hubv1alpha1.RolloutHalted),
		condition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.RolloutHaltedReason),
		condition(hubv1alpha1.StalledCondition, metav1.ConditionTrue, hubv1alpha1.RolloutHaltedReason),
		condition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolloutHaltedReason))
}

// haltedByCanary matches the status of a rollout halted by the failure of ro1 alone, which the
// status names.
func haltedByCanary() OmegaMatcher {
	return And(halted(), HaveField("Rollout.Message", ContainSubstring("ro1")),
		HaveField("FailedClusters", ContainElement(HaveField("Cluster", "ro1"))),
		HaveField("FailedClusters", Not(ContainElement(HaveField("Cluster", Not(Equal("ro1")))))))
}

// complete matches the status of a rollout of revision that completed in every one of n members.
func complete(revision int64, n int32) OmegaMatcher {
	return And(rolloutPhase(hubv1alpha1.RolloutComplete), revisions(revision, revision),
		condition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolloutCompleteReason),
		condition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		condition(hubv1alpha1.StalledCondition, metav1.ConditionFalse, hubv1alpha1.NotStalledReason),
		HaveField("Clusters.Updated", n), HaveField("Clusters.Ready", n), HaveField("FailedClusters", BeEmpty()))
}

// placedState is what a member holds of a FleetBundle: the message of its ConfigMap, and the
// message and revision annotation of its placed bundle ("" where there is none).
type placedState struct {
	ConfigMap, Bundle, Revision string
}

func (p placedState) String() string {
	return fmt.Sprintf("{configMap %q, bundle %q, revision %q}", p.ConfigMap, p.Bundle, p.Revision)
}

// holding returns the placed state of each member, for Eventually and Consistently.
func holding(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]placedState {
	return func(g Gomega) map[string]placedState {
		out := map[string]placedState{}
		for _, m := range members {
			s := placedState{ConfigMap: placedMessage(m, fb)(g)}
			if b := placed(m, fb)(g); b != nil {
				s.Bundle, s.Revision = b.Spec.Message, b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation]
			}
			out[m] = s
		}
		return out
	}
}

// holds is the placed state of a member holding revision with message, in its bundle and its
// ConfigMap.
func holds(revision int64, message string) placedState {
	return placedState{ConfigMap: message, Bundle: message, Revision: strconv.FormatInt(revision, 10)}
}

// all maps each member to the same placed state.
func all(s placedState, members ...string) map[string]placedState {
	out := map[string]placedState{}
	for _, m := range members {
		out[m] = s
	}
	return out
}

// with returns a copy of states where member has s.
func with(states map[string]placedState, member string, s placedState) map[string]placedState {
	out := map[string]placedState{member: s}
	for m, st := range states {
		if m != member {
			out[m] = st
		}
	}
	return out
}

// bundleWrites returns the hub's writes of FleetBundle fb's placed bundle (itself, not its
// status) in member since then.
func bundleWrites(g Gomega, member string, fb *hubv1alpha1.FleetBundle, since time.Time) []controlplane.Write {
	writes, err := fleet.BundleWrites(fl.Member(member).Plane, fb.Namespace, fb.Name, "")
	g.Expect(err).NotTo(HaveOccurred())
	return fleet.WritesSince(writes, since)
}

// auditBarrier returns once the audit log of each member holds every write that completed before
// it was called: it writes a ConfigMap of its own there, and waits until the log has that write
// (a log records writes in the order they complete).
func auditBarrier(g Gomega, members ...string) {
	ctx := context.Background()
	for _, m := range members {
		at := time.Now()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e2e-audit-barrier"}}
		_, err := controllerutil.CreateOrUpdate(ctx, fl.Member(m).Client, cm, func() error {
			cm.Data = map[string]string{"at": at.Format(time.RFC3339Nano)}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) bool {
			writes, err := fl.Member(m).Plane.Writes()
			g.Expect(err).NotTo(HaveOccurred())
			return slices.ContainsFunc(writes, func(w controlplane.Write) bool {
				return w.Resource == "configmaps" && w.Name == cm.Name && !w.At.Before(at)
			})
		}).WithTimeout(timeout).WithPolling(20*time.Millisecond).Should(BeTrue(), "member %s's audit log has caught up", m)
	}
}

// statusWrites returns the hub's writes of the status of fb's placed bundle in member since then.
func statusWrites(g Gomega, member string, fb *hubv1alpha1.FleetBundle, since time.Time) []controlplane.Write {
	writes, err := fleet.BundleWrites(fl.Member(member).Plane, fb.Namespace, fb.Name, "status")
	g.Expect(err).NotTo(HaveOccurred())
	return fleet.WritesSince(writes, since)
}

// writeTimes formats writes for a failure message.
func writeTimes(writes []controlplane.Write) []string {
	out := make([]string, 0, len(writes))
	for _, w := range writes {
		out = append(out, w.At.Format(time.StampMilli)+" "+w.Verb)
	}
	return out
}

// kstatusOf reads FleetBundle fb as kstatus does.
func kstatusOf(fb *hubv1alpha1.FleetBundle) func(Gomega) kstatus.Status {
	return func(g Gomega) kstatus.Status {
		res, err := fleet.KStatus(context.Background(), fl.Hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		return res.Status
	}
}

// messagePolicy installs, in member, a ValidatingAdmissionPolicy refusing ConfigMaps of
// namespace ns whose message is message, and returns the function that removes it (which the
// test's cleanup calls if the test did not).
func messagePolicy(t *testing.T, member, ns, message string) (remove func()) {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), fl.Member(member).Client
	p := fleet.MessagePolicy{Name: "refuse-" + ns, Namespace: ns, Message: message}
	g.Expect(p.Install(ctx, c, timeout)).To(Succeed())
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = p.Remove(ctx, c, timeout)
		}
	})
	return func() {
		g.Expect(p.Remove(ctx, c, timeout)).To(Succeed())
		removed = true
	}
}

// traceRollout records, every 50 ms until the returned function is called, each change of where
// FleetBundle fb's rollout stands (revisions, phase, stage, soak start, admitted members,
// message), and returns them, one line each, for the test's log.
func traceRollout(fb *hubv1alpha1.FleetBundle) (stop func() []string) {
	done, out := make(chan struct{}), make(chan []string)
	go func() {
		var lines []string
		last := ""
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			got := &hubv1alpha1.FleetBundle{}
			if err := fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got); err == nil {
				s, line := got.Status, ""
				if ro := s.Rollout; ro != nil {
					soak := "-"
					if ro.SoakStartTime != nil {
						soak = ro.SoakStartTime.UTC().Format(time.TimeOnly)
					}
					line = fmt.Sprintf("current %d update %d: %s stage %s soak since %s admitted through %q: %s",
						s.CurrentRevision, s.UpdateRevision, ro.Phase, ro.Stage, soak, ro.AdmittedThrough, ro.Message)
				}
				if line != last {
					lines, last = append(lines, time.Now().UTC().Format("15:04:05.000")+" "+line), line
				}
			}
			select {
			case <-done:
				out <- lines
				return
			case <-tick.C:
			}
		}
	}()
	return func() []string {
		close(done)
		return <-out
	}
}

var (
	rolloutCLIOnce sync.Once
	rolloutCLIHave bool
)

// haveRolloutCLI reports whether the hub binary has the rollout command (issue 23's CLI, built
// apart from the controller); without it the tests edit the spec as the command would, and say
// so.
func haveRolloutCLI(t *testing.T) bool {
	rolloutCLIOnce.Do(func() {
		// `hub rollout --help` would print the root's help if there were no rollout command.
		out, err := exec.Command(fl.Binary, "rollout", "status", "--help").CombinedOutput()
		rolloutCLIHave = err == nil && strings.Contains(string(out), "rollout status")
	})
	if !rolloutCLIHave {
		t.Log("the hub binary has no rollout command yet: editing the FleetBundle as it would")
	}
	return rolloutCLIHave
}

// hubRollout runs `hub rollout <sub> web -n ns` against the suite's hub with args, and returns
// its exit code and output.
func hubRollout(t *testing.T, sub, ns string, args ...string) (int, string) {
	t.Helper()
	code, stdout, stderr := hubCommand(t, append([]string{"rollout", sub, "web", "-n", ns, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath}, args...)...)
	return code, stdout + stderr
}

// rolloutWatch is `hub rollout status web -n ns --timeout <timeout>` running on: it follows the
// rollout until it completes or stops.
type rolloutWatch struct {
	done chan struct{}
	code int
	out  []byte
	err  error
}

// watchRollout starts `hub rollout status` (watching) on FleetBundle ns/web.
func watchRollout(ns string, limit time.Duration) *rolloutWatch {
	w := &rolloutWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		cmd := exec.Command(fl.Binary, "rollout", "status", "web", "-n", ns, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--timeout", limit.String())
		w.out, w.err = cmd.CombinedOutput()
		w.code = cmd.ProcessState.ExitCode()
	}()
	return w
}

// wait waits for the command to exit, at most timeout, logs its output and returns its exit
// code.
func (w *rolloutWatch) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		t.Fatalf("hub rollout status still running after %v", timeout)
	}
	t.Logf("$ hub rollout status (watching): exit %d (%v)\n%s", w.code, w.err, w.out)
	return w.code
}

// setPaused pauses or resumes the rollout of fb: with `hub rollout pause|resume` where the
// binary has it.
func setPaused(t *testing.T, fb *hubv1alpha1.FleetBundle, paused bool) {
	t.Helper()
	if haveRolloutCLI(t) {
		sub := map[bool]string{true: "pause", false: "resume"}[paused]
		code, out := hubRollout(t, sub, fb.Namespace)
		NewWithT(t).Expect(code).To(Equal(0), out)
		return
	}
	editFleetBundle(NewWithT(t), fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout.Paused = paused })
}

// TestRolloutCanaryThenRest (issue 23): a template change reaches the canary first; the rest keep
// the old message while the canary soaks, then get the new one; the rollout reads Complete
// (Progressing=False RolloutComplete, Ready=True, kstatus Current) with both revisions kept as
// ControllerRevisions, and each member got exactly one write.
func TestRolloutCanaryThenRest(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns, soak = "e2e.rollout/canary", "rollout-canary", 3 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	rolloutFixture(t, ns, key)
	fb := placedThenStaged(t, ns, key, canaryThenRest(soak), members...)

	changed := time.Now()
	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	var watch *rolloutWatch
	if haveRolloutCLI(t) {
		watch = watchRollout(ns, timeout)
	}
	g.Eventually(placedMessage("ro1", fb)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal("v2"))
	canaryAt := time.Now()
	t.Logf("template change → the canary's ConfigMap: %v", canaryAt.Sub(changed).Round(time.Millisecond))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(soak).WithPolling(interval).Should(And(
		rolloutPhase(hubv1alpha1.RolloutSoaking), HaveField("Rollout.Stage", "canary"), revisions(1, 2),
		condition(hubv1alpha1.ProgressingCondition, metav1.ConditionTrue, hubv1alpha1.SoakingReason),
		condition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.ProgressingReason),
		condition(hubv1alpha1.StalledCondition, metav1.ConditionFalse, hubv1alpha1.NotStalledReason),
		HaveField("Clusters.Updated", BeEquivalentTo(1)), HaveField("Rollout.SoakStartTime", Not(BeNil()))))
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.InProgressStatus), "a soaking rollout reads InProgress")
	// The soak started once the canary's bundle was Ready, after its ConfigMap changed: the rest
	// keep v1 at least until then. (Checked without failing at once, so that a failure also
	// reports, from the audit logs below, how much sooner than the soak the rest were updated.)
	var duringSoak string
	NewGomega(func(message string, _ ...int) { duringSoak = message }).Consistently(holding(fb, members...)).
		WithTimeout(time.Until(canaryAt.Add(soak-300*time.Millisecond))).WithPolling(interval).Should(
		Equal(with(all(holds(1, "v1"), members...), "ro1", holds(2, "v2"))), "the rest keep v1 while the canary soaks")
	if duringSoak != "" {
		t.Errorf("%v after the canary's ConfigMap changed: %s", time.Since(canaryAt).Round(time.Millisecond), duringSoak)
	}

	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal(all(holds(2, "v2"), members...)))
	t.Logf("template change → every ConfigMap: %v (soak %v)", time.Since(changed).Round(time.Millisecond), soak)
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(2, 3))
	g.Eventually(kstatusOf(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal(kstatus.CurrentStatus))
	if watch != nil {
		g.Expect(watch.wait(t, timeout)).To(Equal(0), "hub rollout status, watching, exits 0 once the rollout is complete")
	}

	// From the members' audit logs: one write each, the rest's no sooner than a soak after the
	// canary's.
	auditBarrier(g, rolloutMemberNames...)
	canary := bundleWrites(g, "ro1", fb, changed)
	g.Expect(canary).To(HaveLen(1), "the canary's writes: %v", writeTimes(canary))
	for _, m := range []string{"ro2", "ro3"} {
		w := bundleWrites(g, m, fb, changed)
		g.Expect(w).To(HaveLen(1), "%s's writes: %v", m, writeTimes(w))
		t.Logf("%s updated %v after the canary", m, w[0].At.Sub(canary[0].At).Round(time.Millisecond))
		g.Expect(w[0].At).To(BeTemporally(">=", canary[0].At.Add(soak)), "%s updated %v after the canary, before its soak of %v ended", m, w[0].At.Sub(canary[0].At), soak)
	}

	// Both revisions are ControllerRevisions of the FleetBundle, holding their templates.
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), got)).To(Succeed())
	revs, err := fleet.Revisions(ctx, fl.Hub, fb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(revs).To(HaveLen(2))
	for i, rev := range revs {
		n := int64(i + 1)
		g.Expect(rev.Name).To(Equal(fmt.Sprintf("web-%d", n)))
		g.Expect(rev.Revision).To(Equal(n))
		g.Expect(rev.Labels).To(HaveKeyWithValue(hubv1alpha1.FleetBundleLabel, ns+".web"))
		owner := metav1.GetControllerOf(&rev)
		g.Expect(owner).NotTo(BeNil(), "%s's controller", rev.Name)
		g.Expect(owner.UID).To(Equal(got.UID))
		g.Expect(owner.Kind).To(Equal("FleetBundle"))
		var tmpl hubv1alpha1.ConfigBundleTemplate
		g.Expect(json.Unmarshal(rev.Data.Raw, &tmpl)).To(Succeed(), string(rev.Data.Raw))
		g.Expect(tmpl.Spec.Message).To(Equal(fmt.Sprintf("v%d", n)), "%s's template", rev.Name)
	}
	g.Eventually(fleetBundleEvents(fb, hubv1alpha1.RolloutCompleteEvent)).WithTimeout(timeout).WithPolling(interval).ShouldNot(BeEmpty())
	g.Expect(fleetBundleEvents(fb, hubv1alpha1.StageCompletedEvent)(g)).To(ContainElement(HaveField("Note", ContainSubstring("canary"))))
	for _, reason := range []string{hubv1alpha1.StageStartedEvent, hubv1alpha1.StageCompletedEvent, hubv1alpha1.RolloutCompleteEvent} {
		for _, e := range fleetBundleEvents(fb, reason)(g) {
			t.Logf("FleetBundle Event: %s %s: %s", e.Type, e.Reason, e.Note)
		}
	}
}

// haltedByTheCanary sets up rollout members ro1 (canary, refusing ConfigMaps saying "bad"),
// ro2 and ro3 (rest), FleetBundle ns/web at v1 with rollout, changes its template to "bad", and
// waits until the rollout halts (or, with onFailure Rollback, rolls back). It returns the
// FleetBundle, when the template changed, and the function removing the canary's policy.
func haltedByTheCanary(t *testing.T, ns, key string, rollout *hubv1alpha1.RolloutStrategy, want OmegaMatcher) (*hubv1alpha1.FleetBundle, time.Time, func()) {
	t.Helper()
	g := NewWithT(t)
	rolloutFixture(t, ns, key)
	fb := placedThenStaged(t, ns, key, rollout, "ro1", "ro2", "ro3")
	unrefuse := messagePolicy(t, "ro1", ns, "bad")
	stopTrace := traceRollout(fb)
	t.Cleanup(func() {
		for _, line := range stopTrace() {
			t.Logf("rollout: %s", line)
		}
	})
	changed := time.Now()
	g.Expect(updateTemplate(g, fb, "bad")).To(Succeed())
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(want, HaveField("UpdateRevision", BeEquivalentTo(2))))
	t.Logf("template change → %v: %v", fleetBundleStatus(fb)(g).Rollout.Phase, time.Since(changed).Round(time.Millisecond))
	return fb, changed, unrefuse
}

// TestRolloutHaltsWhenTheCanaryFails (issue 23): the canary refuses the new ConfigMap (an
// admission policy there): the rollout halts (Ready=False RolloutHalted, Stalled=True, kstatus
// Failed, the canary in failedClusters, `hub rollout status` exit 1), and no other member gets
// the change, neither over a window longer than the soak nor in its audit log; a fixed template
// then rolls out to all.
func TestRolloutHaltsWhenTheCanaryFails(t *testing.T) {
	g := NewWithT(t)
	const key, ns, soak = "e2e.rollout/halt", "rollout-halt", 2 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	fb, changed, _ := haltedByTheCanary(t, ns, key, canaryThenRest(soak), haltedByCanary())
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.FailedStatus), "a halted rollout reads Failed")
	g.Expect(fleetBundleStatus(fb)(g)).To(And(revisions(1, 2), HaveField("Clusters.Updated", BeEquivalentTo(1))))
	if haveRolloutCLI(t) {
		code, out := hubRollout(t, "status", ns, "--watch=false")
		g.Expect(code).To(Equal(1), "hub rollout status of a halted rollout: %s", out)
		g.Expect(watchRollout(ns, timeout).wait(t, timeout)).To(Equal(1), "hub rollout status, watching, exits 1 on a halted rollout")
	}

	// The canary holds revision 2 (its bundle) and still publishes v1 (its ConfigMap, which the
	// policy keeps); the others keep revision 1, for longer than the soak.
	want := with(all(holds(1, "v1"), members...), "ro1", placedState{ConfigMap: "v1", Bundle: "bad", Revision: "2"})
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))
	g.Consistently(func(g Gomega) map[string]placedState {
		g.Expect(fleetBundleStatus(fb)(g)).To(haltedByCanary())
		return holding(fb, members...)(g)
	}).WithTimeout(2*soak+time.Second).WithPolling(interval).Should(Equal(want), "halted: no other member gets the change")
	auditBarrier(g, rolloutMemberNames...)
	g.Expect(bundleWrites(g, "ro1", fb, changed)).To(HaveLen(1), "one write to the canary")
	for _, m := range []string{"ro2", "ro3"} {
		g.Expect(bundleWrites(g, m, fb, changed)).To(BeEmpty(), "the hub wrote %s's bundle during the halt", m)
	}
	g.Eventually(fleetBundleEvents(fb, hubv1alpha1.RolloutHaltedEvent)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring("ro1")))))

	// A fixed template (revision 3) rolls out to all, canary first.
	fixed := time.Now()
	g.Expect(updateTemplate(g, fb, "v3")).To(Succeed())
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(3, "v3"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(3, 3))
	g.Eventually(kstatusOf(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal(kstatus.CurrentStatus))
	t.Logf("fixed template → Complete: %v", time.Since(fixed).Round(time.Millisecond))
	auditBarrier(g, rolloutMemberNames...)
	canary := bundleWrites(g, "ro1", fb, fixed)
	g.Expect(canary).To(HaveLen(1), "the canary's writes: %v", writeTimes(canary))
	for _, m := range []string{"ro2", "ro3"} {
		w := bundleWrites(g, m, fb, fixed)
		g.Expect(w).To(HaveLen(1), "%s's writes: %v", m, writeTimes(w))
		g.Expect(w[0].At).To(BeTemporally(">=", canary[0].At.Add(soak)), "%s updated before the canary's soak ended", m)
	}
}

// TestRolloutHaltedGoesOnWhenTheFailureClears (issue 23): a halt is computed from facts: once the
// canary's policy is removed, its bundle gets Ready and the halted rollout goes on by itself to
// every member.
func TestRolloutHaltedGoesOnWhenTheFailureClears(t *testing.T) {
	g := NewWithT(t)
	const key, ns, soak = "e2e.rollout/unhalt", "rollout-unhalt", 2 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	fb, _, unrefuse := haltedByTheCanary(t, ns, key, canaryThenRest(soak), haltedByCanary())
	unrefuse()
	cleared := time.Now()
	// The canary's reconciler retries with back-off (3 s, doubling): the wait allows for it.
	g.Eventually(holding(fb, members...)).WithTimeout(rolloutTimeout).WithPolling(interval).Should(Equal(all(holds(2, "bad"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(2, 3))
	t.Logf("policy removed → Complete: %v", time.Since(cleared).Round(time.Millisecond))
}

// TestRolloutRollsBackTheCanary (issue 23): with onFailure Rollback, the canary that refuses the
// new ConfigMap gets the previous revision back (one more write, none to the others); the
// rollout reads RolledBack with failedRevision, Ready=False RolledBack, Stalled=True, and the
// failed revision is not placed again; a new template then rolls out.
func TestRolloutRollsBackTheCanary(t *testing.T) {
	g := NewWithT(t)
	const key, ns, soak = "e2e.rollout/rollback", "rollout-rollback", 2 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	rollout := canaryThenRest(soak)
	rollout.OnFailure = hubv1alpha1.OnFailureRollback
	fb, changed, _ := haltedByTheCanary(t, ns, key, rollout, And(rolloutPhase(hubv1alpha1.RolloutRolledBack),
		HaveField("Rollout.FailedRevision", BeEquivalentTo(2)), revisions(1, 2), HaveField("Rollout.Message", ContainSubstring("ro1")),
		condition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.RolledBackReason),
		condition(hubv1alpha1.StalledCondition, metav1.ConditionTrue, hubv1alpha1.RolledBackReason),
		condition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolledBackReason)))
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.FailedStatus), "a rolled-back rollout reads Failed")

	// The canary's bundle is back at revision 1 and Ready; nobody gets revision 2 again.
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)))
	g.Eventually(bundleStatus("ro1", placed("ro1", fb)(g))).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", ContainElement(And(HaveField("Type", configbundlev1alpha1.ReadyCondition), HaveField("Status", metav1.ConditionTrue)))))
	g.Consistently(func(g Gomega) map[string]placedState {
		g.Expect(fleetBundleStatus(fb)(g)).To(And(rolloutPhase(hubv1alpha1.RolloutRolledBack), HaveField("Rollout.FailedRevision", BeEquivalentTo(2))))
		return holding(fb, members...)(g)
	}).WithTimeout(2*soak+time.Second).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)), "the failed revision is not placed again")
	auditBarrier(g, rolloutMemberNames...)
	canary := bundleWrites(g, "ro1", fb, changed)
	g.Expect(canary).To(HaveLen(2), "the canary: updated, rolled back: %v", writeTimes(canary))
	for _, m := range []string{"ro2", "ro3"} {
		g.Expect(bundleWrites(g, m, fb, changed)).To(BeEmpty(), "the hub wrote %s's bundle", m)
	}
	g.Eventually(fleetBundleEvents(fb, hubv1alpha1.RolledBackEvent)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring("ro1")))))

	// A new template (revision 3) rolls out.
	g.Expect(updateTemplate(g, fb, "v3")).To(Succeed())
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(3, "v3"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(3, 3))
}

// TestRolloutPausedChangesNothing (issue 23): while spec.rollout.paused is true (`hub rollout
// pause`), a template change reaches no member (Paused, Progressing=False RolloutPaused, no write
// in any member's audit log); resumed, it rolls out.
func TestRolloutPausedChangesNothing(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.rollout/paused", "rollout-paused"
	members := []string{"ro1", "ro2", "ro3"}
	rolloutFixture(t, ns, key)
	fb := placedThenStaged(t, ns, key, canaryThenRest(time.Second), members...)

	setPaused(t, fb, true)
	g.Eventually(func(g Gomega) bool {
		got := &hubv1alpha1.FleetBundle{}
		g.Expect(fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got)).To(Succeed())
		return got.Spec.Rollout.Paused
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	changed := time.Now()
	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		rolloutPhase(hubv1alpha1.RolloutPaused), revisions(1, 2),
		condition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolloutPausedReason)))
	g.Consistently(holding(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)), "paused: nothing changes")
	for _, m := range members {
		g.Expect(bundleWrites(g, m, fb, changed)).To(BeEmpty(), "the hub wrote %s's bundle while paused", m)
	}

	setPaused(t, fb, false)
	resumed := time.Now()
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(2, "v2"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(2, 3))
	t.Logf("resumed → Complete: %v", time.Since(resumed).Round(time.Millisecond))
}

// TestRolloutMaxConcurrency (issue 23): a stage of three members with maxConcurrency 1 updates
// them one at a time, in name order: from the members' audit logs, each next member's bundle is
// written only after the previous member's reconciler reported its bundle (Ready) — never more
// than one updated and not Ready at once.
func TestRolloutMaxConcurrency(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.rollout/concurrency", "rollout-concurrency"
	members := []string{"ro1", "ro2", "ro3"}
	rolloutMembers(t, members...)
	for _, m := range members {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	one := stage("all", "", 0)
	one.MaxConcurrency = ptr.To(intstr.FromInt32(1))
	fb := placedThenStaged(t, ns, key, &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{one}}, members...)

	changed := time.Now()
	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(2, "v2"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(2, 3))
	t.Logf("template change → Complete, one member at a time: %v", time.Since(changed).Round(time.Millisecond))
	auditBarrier(g, rolloutMemberNames...)

	type update struct {
		member string
		at     time.Time
	}
	var updates []update
	for _, m := range members {
		w := bundleWrites(g, m, fb, changed)
		g.Expect(w).To(HaveLen(1), "%s's writes: %v", m, writeTimes(w))
		updates = append(updates, update{m, w[0].At})
	}
	slices.SortFunc(updates, func(a, b update) int { return a.at.Compare(b.at) })
	order := []string{}
	for _, u := range updates {
		order = append(order, u.member)
	}
	g.Expect(order).To(Equal(members), "members are admitted in name order")
	for i, u := range updates[:len(updates)-1] {
		next := updates[i+1]
		var reported []time.Time
		for _, w := range statusWrites(g, u.member, fb, u.at) {
			if w.At.Before(next.at) {
				reported = append(reported, w.At)
			}
		}
		g.Expect(reported).NotTo(BeEmpty(), "%s updated at %s, before %s's bundle was reported (Ready) after its update at %s",
			next.member, next.at.Format(time.StampMilli), u.member, u.at.Format(time.StampMilli))
		t.Logf("%s updated %v after %s, whose bundle was reported %v after its update", next.member,
			next.at.Sub(u.at).Round(time.Millisecond), u.member, reported[0].Sub(u.at).Round(time.Millisecond))
	}
}

// holdGarbage makes, in a member, the ConfigMap ns/name of an earlier ConfigBundle of that name
// (its controller, with a uid that no longer exists) being deleted, held by a finalizer of the
// test's: a bundle placed there waits for it to go, not Ready (no Ready condition) and not
// failed. It returns the function that lets it go (which the test's cleanup calls too).
func holdGarbage(t *testing.T, member, ns, name string) (release func()) {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), fl.Member(member).Client
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"e2e.configbundle.dev/hold"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle", Name: name,
			UID: "00000000-0000-0000-0000-000000000000", Controller: ptr.To(true)}}}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	g.Expect(c.Delete(ctx, cm)).To(Succeed())
	release = func() {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		g.Expect(client.IgnoreNotFound(c.Patch(context.Background(), cm, patch))).To(Succeed())
	}
	t.Cleanup(release)
	return release
}

// TestRolloutProgressDeadline (issue 23): an updated member whose bundle does not get Ready
// within progressDeadline fails the rollout: the first revision, placed in the canary whose
// namespace holds an earlier bundle's ConfigMap being deleted, is not Ready there (and not
// failed) until the deadline; then the rollout halts (a first revision has nothing to roll back
// to) with the canary in failedClusters as ProgressDeadlineExceeded, and no other member gets
// the bundle. Once the garbage goes, the canary is Ready and the rollout goes on by itself.
func TestRolloutProgressDeadline(t *testing.T) {
	g := NewWithT(t)
	const key, ns, deadline = "e2e.rollout/deadline", "rollout-deadline", 3 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	rolloutFixture(t, ns, key)
	release := holdGarbage(t, "ro1", ns, "web")
	rollout := canaryThenRest(time.Second)
	rollout.ProgressDeadline = &metav1.Duration{Duration: deadline}
	created := time.Now()
	fb := newRolloutBundle(t, ns, key, "v1", rollout, nil)
	stopTrace := traceRollout(fb)
	defer func() {
		for _, line := range stopTrace() {
			t.Logf("rollout: %s", line)
		}
	}()

	g.Eventually(placed("ro1", fb)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).ShouldNot(BeNil())
	placedAt := time.Now()
	t.Logf("created → placed in the canary: %v", placedAt.Sub(created).Round(time.Millisecond))
	notFailed := func(g Gomega) hubv1alpha1.FleetBundleStatus {
		s := fleetBundleStatus(fb)(g)
		g.Expect(s.FailedClusters).NotTo(ContainElement(HaveField("Reason", hubv1alpha1.ProgressDeadlineExceededReason)))
		return s
	}
	g.Consistently(notFailed).WithTimeout(deadline-time.Second).WithPolling(interval).ShouldNot(rolloutPhase(hubv1alpha1.RolloutHalted),
		"not failed before the deadline")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(halted(), revisions(0, 1),
		HaveField("FailedClusters", ConsistOf(failedCluster("ro1", hubv1alpha1.ProgressDeadlineExceededReason)))))
	haltedAt := time.Now()
	t.Logf("placed in the canary → Halted (ProgressDeadlineExceeded, deadline %v): %v", deadline, haltedAt.Sub(placedAt).Round(time.Millisecond))
	g.Expect(haltedAt.Sub(placedAt)).To(BeNumerically(">=", deadline-time.Second), "failed before its deadline")
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.FailedStatus))
	g.Consistently(holding(fb, members...)).WithTimeout(2*time.Second).WithPolling(interval).Should(Equal(map[string]placedState{
		"ro1": {Bundle: "v1", Revision: "1"}, "ro2": {}, "ro3": {}}), "halted: nothing placed beyond the canary")
	for _, m := range []string{"ro2", "ro3"} {
		g.Expect(bundleWrites(g, m, fb, created)).To(BeEmpty(), "the hub wrote %s's bundle", m)
	}

	release()
	g.Eventually(holding(fb, members...)).WithTimeout(rolloutTimeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(1, 3))
}

// TestRolloutHistoryAndUndo (issue 23): with revisionHistoryLimit 2, after five template changes
// the FleetBundle keeps the revision in use and the two before it as ControllerRevisions; `hub
// rollout history` lists them, `hub rollout status` exits 0 on Complete, and `hub rollout undo
// --to-revision` writes a kept revision's template back into the spec, which rolls out.
func TestRolloutHistoryAndUndo(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.rollout/history", "rollout-history"
	members := []string{"ro1", "ro2"}
	rolloutMembers(t, members...)
	for _, m := range members {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	fb := newRolloutBundle(t, ns, key, "v1", &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{stage("all", "", 0)}}, ptr.To[int32](2))
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)))
	for i := int64(2); i <= 6; i++ {
		msg := fmt.Sprintf("v%d", i)
		g.Expect(updateTemplate(g, fb, msg)).To(Succeed())
		g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(i, msg), members...)))
	}
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(6, 2))
	kept := func(g Gomega) []int64 {
		revs, err := fleet.Revisions(ctx, fl.Hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		var out []int64
		for _, r := range revs {
			g.Expect(r.Name).To(Equal(fmt.Sprintf("web-%d", r.Revision)))
			out = append(out, r.Revision)
		}
		return out
	}
	g.Eventually(kept).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{4, 5, 6}), "the revision in use and the 2 before it")

	if !haveRolloutCLI(t) {
		// What undo does: the template of revision 4 back into the spec.
		revs, err := fleet.Revisions(ctx, fl.Hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		var tmpl hubv1alpha1.ConfigBundleTemplate
		g.Expect(json.Unmarshal(revs[0].Data.Raw, &tmpl)).To(Succeed())
		editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template = tmpl })
	} else {
		code, out := hubRollout(t, "status", ns, "--watch=false")
		g.Expect(code).To(Equal(0), "hub rollout status of a complete rollout: %s", out)
		code, out = hubRollout(t, "history", ns)
		g.Expect(code).To(Equal(0), out)
		for _, n := range []string{"4", "5", "6"} {
			g.Expect(out).To(ContainSubstring(n))
		}
		code, out = hubRollout(t, "history", ns, "--revision", "5")
		g.Expect(code).To(Equal(0), out)
		g.Expect(out).To(ContainSubstring("v5"))
		code, out = hubRollout(t, "history", ns, "--revision", "3")
		g.Expect(code).To(Equal(1), "revision 3 is not kept: %s", out)
		code, out = hubRollout(t, "undo", ns, "--to-revision", "4")
		g.Expect(code).To(Equal(0), out)
	}
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), got)).To(Succeed())
	g.Expect(got.Spec.Template.Spec.Message).To(Equal("v4"), "undo wrote revision 4's template into the spec")
	g.Eventually(func(g Gomega) []string {
		var out []string
		for _, s := range holding(fb, members...)(g) {
			out = append(out, s.ConfigMap)
		}
		return out
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{"v4", "v4"}))
	s := fleetBundleStatus(fb)(g)
	t.Logf("after undo to revision 4: currentRevision %d, updateRevision %d", s.CurrentRevision, s.UpdateRevision)
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(rolloutPhase(hubv1alpha1.RolloutComplete),
		condition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason)))
	g.Eventually(kept).WithTimeout(timeout).WithPolling(interval).Should(HaveLen(3), "still within the limit")
	if haveRolloutCLI(t) {
		code, out := hubRollout(t, "status", ns, "--watch=false")
		g.Expect(code).To(Equal(0), out)
	}
}

// TestRolloutMidRolloutMembersAndHubRestart (issue 23): members selected while the canary soaks
// get the revision of their stage (the canary's stage: the new one; the rest's, not reached: the
// current one); a hub restarted during the soak resumes the rollout where it stood: the soak is
// not started again, and no member is written more than once per revision it gets.
func TestRolloutMidRolloutMembersAndHubRestart(t *testing.T) {
	g := NewWithT(t)
	const key, ns, soak = "e2e.rollout/restart", "rollout-restart", 5 * time.Second
	rolloutFixture(t, ns, key)
	rolloutMembers(t, "ro4", "ro5")
	ensureNamespace(g, "ro4", ns)
	ensureNamespace(g, "ro5", ns)
	fb := placedThenStaged(t, ns, key, canaryThenRest(soak), "ro1", "ro2", "ro3")

	changed := time.Now()
	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	g.Eventually(holding(fb, "ro1")).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(2, "v2"), "ro1")))

	// Selected mid-rollout: ro5 into the canary's stage (the current one) gets revision 2, ro4
	// into the rest's (not reached) revision 1.
	selectMember(t, "ro5", ringLabel, "canary")
	selectMember(t, "ro4", ringLabel, "rest")
	selectMember(t, "ro5", key, "yes")
	selectMember(t, "ro4", key, "yes")
	all5 := []string{"ro1", "ro2", "ro3", "ro4", "ro5"}
	want := map[string]placedState{"ro1": holds(2, "v2"), "ro5": holds(2, "v2"), "ro2": holds(1, "v1"), "ro3": holds(1, "v1"), "ro4": holds(1, "v1")}
	g.Eventually(holding(fb, all5...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))
	var soaking hubv1alpha1.FleetBundleStatus
	g.Eventually(func(g Gomega) hubv1alpha1.FleetBundleStatus {
		soaking = fleetBundleStatus(fb)(g)
		return soaking
	}).WithTimeout(timeout).WithPolling(interval).Should(And(rolloutPhase(hubv1alpha1.RolloutSoaking), HaveField("Rollout.Stage", "canary"),
		HaveField("Clusters.Selected", BeEquivalentTo(5)), HaveField("Clusters.Updated", BeEquivalentTo(2)), HaveField("Rollout.SoakStartTime", Not(BeNil()))))
	soakStart := soaking.Rollout.SoakStartTime.Time
	t.Logf("the canary stage soaks since %s", soakStart.Format(time.RFC3339))

	// The hub restarts a while into the soak.
	stopTrace := traceRollout(fb)
	defer func() {
		for _, line := range stopTrace() {
			t.Logf("rollout: %s", line)
		}
	}()
	time.Sleep(time.Until(soakStart.Add(soak / 2)))
	fl.StopHub(fleet.HubName, syscall.SIGTERM)
	t.Cleanup(func() {
		if fl.HubProcess(fleet.HubName) == nil {
			g.Expect(startHub()).To(Succeed())
		}
	})
	g.Consistently(holding(fb, all5...)).WithTimeout(time.Second).WithPolling(interval).Should(Equal(want))
	restarting := time.Now()
	g.Expect(startHub()).To(Succeed())
	t.Logf("hub restarted in %v", time.Since(restarting).Round(time.Millisecond))
	if s := fleetBundleStatus(fb)(g); s.Rollout != nil && s.Rollout.Phase == hubv1alpha1.RolloutSoaking && s.Rollout.Stage == "canary" {
		g.Expect(s.Rollout.SoakStartTime).NotTo(BeNil())
		g.Expect(s.Rollout.SoakStartTime.Time).To(BeTemporally("==", soakStart), "the soak's start survives the restart")
	}
	g.Eventually(holding(fb, all5...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(2, "v2"), all5...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(2, 5))
	auditBarrier(g, rolloutMemberNames...)

	// From the audit logs: the rest were updated when the soak that started before the restart
	// ended, sooner than a soak after the restart; no member was written more than once per
	// revision it got (ro4: revision 1, then 2; ro5, selected into the current stage, may get
	// revision 1 before the status admits it to revision 2).
	writes := map[string][]controlplane.Write{}
	for _, m := range all5 {
		writes[m] = bundleWrites(g, m, fb, changed)
		t.Logf("%s: the hub's writes of the placed bundle since the template change: %v", m, writeTimes(writes[m]))
	}
	for _, m := range []string{"ro2", "ro3", "ro4"} {
		last := writes[m][len(writes[m])-1].At
		t.Logf("%s updated %v after the soak started (soak %v), %v after the restart began", m,
			last.Sub(soakStart).Round(time.Millisecond), soak, last.Sub(restarting).Round(time.Millisecond))
	}
	for m, n := range map[string]int{"ro1": 1, "ro2": 1, "ro3": 1, "ro4": 2} {
		g.Expect(writes[m]).To(HaveLen(n), "%s's writes: %v", m, writeTimes(writes[m]))
	}
	g.Expect(len(writes["ro5"])).To(BeNumerically("<=", 2), "ro5's writes: %v", writeTimes(writes["ro5"]))
	for _, m := range []string{"ro2", "ro3", "ro4"} {
		last := writes[m][len(writes[m])-1].At
		g.Expect(last).To(BeTemporally("<", restarting.Add(soak)), "%s: the soak started again after the restart", m)
		g.Expect(last).To(BeTemporally(">=", soakStart.Add(soak)), "%s updated before the soak ended", m)
	}
}
