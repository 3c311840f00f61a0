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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// The rollout tests run on members of their own, ro1 to ro5: regular control planes
// whose API servers log every write, so
// that a test counts, in each member, the hub's writes of the placed bundle and when they
// landed. The first rollout test that runs starts them; each test joins the ones it uses and
// makes them leave when it ends, so that the rest of the suite never sees them.
var rolloutMemberNames = []string{"ro1", "ro2", "ro3", "ro4", "ro5"}

// ringLabel puts a rollout member in a stage: canary, or rest.
const ringLabel = "e2e.rollout/ring"

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
		fleet.RolloutPhase(hubv1alpha1.RolloutComplete), fleet.RolloutRevisions(1, 1), fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason)))
	return fb
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

// haveRolloutCLI reports whether the hub binary has the rollout command (the rollout CLI, built
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

// TestRolloutCanaryThenRest: a template change reaches the canary first; the rest keep
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
		fleet.RolloutPhase(hubv1alpha1.RolloutSoaking), HaveField("Rollout.Stage", "canary"), fleet.RolloutRevisions(1, 2),
		fleet.RolloutCondition(hubv1alpha1.ProgressingCondition, metav1.ConditionTrue, hubv1alpha1.SoakingReason),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.ProgressingReason),
		fleet.RolloutCondition(hubv1alpha1.StalledCondition, metav1.ConditionFalse, hubv1alpha1.NotStalledReason),
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
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(2, 3))
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

// TestRolloutMidRolloutMembersAndHubRestart: members selected while the canary soaks
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
	}).WithTimeout(timeout).WithPolling(interval).Should(And(fleet.RolloutPhase(hubv1alpha1.RolloutSoaking), HaveField("Rollout.Stage", "canary"),
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
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(2, 5))
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
