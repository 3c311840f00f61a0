package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// resumeAtOnce clears spec.paused of the members all at once, as many operators resuming their
// members together would, and returns when every write is done.
func resumeAtOnce(g Gomega, names ...string) {
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() {
			mc := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
			errs[i] = fl.Hub.Patch(context.Background(), mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		g.Expect(err).NotTo(HaveOccurred(), "resuming %s", names[i])
	}
}

// firstStatusAfter returns when member's reconciler first reported fb's placed bundle after at.
func firstStatusAfter(g Gomega, member string, fb *hubv1alpha1.FleetBundle, at time.Time) time.Time {
	writes, err := fleet.BundleWrites(fl.Member(member).Plane, fb.Namespace, fb.Name, "status")
	g.Expect(err).NotTo(HaveOccurred())
	after := fleet.WritesSince(writes, at.Add(time.Nanosecond))
	g.Expect(after).NotTo(BeEmpty(), "%s reported its bundle after its write at %s", member, at.Format(time.StampMilli))
	return after[0].At
}

// TestRolloutHeldByPausedStages replays a red team's steps: stages canary (ro1), mid (ro2, ro3,
// one at a time, soak 2s) and rest (ro4, ro5, one at a time), maxFailures 0, onFailure
// Rollback, and a policy in ro4 that refuses the new value. With ro2 to ro5 paused, the new
// template reaches the canary and the rollout holds at stage mid, Progressing and never
// Complete, its status and `hub rollout status` naming the paused members it waits for.
// Resumed all at once, the members are written one at a time (the members' audit logs: the
// second of mid only after the first reported its bundle, ro4 a soak after), and ro4's refusal
// rolls the rollout back: every member holds the old value again and ro5 never got the new one.
func TestRolloutHeldByPausedStages(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns, soak = "e2e.rollout/paused-stages", "rollout-paused", 2 * time.Second
	members := []string{"ro1", "ro2", "ro3", "ro4", "ro5"}
	rolloutMembers(t, members...)
	for m, ring := range map[string]string{"ro1": "canary", "ro2": "mid", "ro3": "mid", "ro4": "rest", "ro5": "rest"} {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
		selectMember(t, m, ringLabel, ring)
	}
	one := ptr.To(intstr.FromInt32(1))
	strategy := &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{stage("canary", "canary", 0), stage("mid", "mid", soak), stage("rest", "rest", 0)},
		MaxFailures: ptr.To(intstr.FromInt32(0)), OnFailure: hubv1alpha1.OnFailureRollback}
	strategy.Stages[1].MaxConcurrency, strategy.Stages[2].MaxConcurrency = one, one
	fb := placedThenStaged(t, ns, key, strategy, members...)
	policy := fleet.MessagePolicy{Name: "refuse-" + ns, Namespace: ns, Message: "v2"}
	g.Expect(policy.Install(ctx, fl.Member("ro4").Client, timeout)).To(Succeed())
	t.Cleanup(func() { _ = policy.Remove(context.Background(), fl.Member("ro4").Client, timeout) })
	for _, m := range members[1:] {
		pauseMember(t, m)
	}

	// The new template reaches the canary; the rollout holds at mid, naming its paused members.
	changed := time.Now()
	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	held := And(fleet.RolloutPhase(hubv1alpha1.RolloutProgressing), HaveField("Rollout.Stage", "mid"), fleet.RolloutRevisions(1, 2),
		HaveField("Rollout.Message", ContainSubstring("waiting for paused members ro2, ro3")),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.ProgressingReason))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(held)
	g.Consistently(fleetBundleStatus(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(held, "a rollout with its later stages paused is not Complete")
	g.Expect(holding(fb, members...)(g)).To(Equal(with(all(holds(1, "v1"), members...), "ro1", holds(2, "v2"))))
	if haveRolloutCLI(t) {
		code, stdout, stderr := hubCommand(t, "rollout", "status", "web", "-n", ns, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--watch=false")
		t.Logf("$ hub rollout status --watch=false: exit %d\n%s%s", code, stdout, stderr)
		g.Expect(code).To(Equal(1), "the rollout is not complete")
		g.Expect(stdout).To(ContainSubstring("stage mid, phase Progressing"))
		g.Expect(stdout).To(ContainSubstring("waiting for paused members ro2, ro3"))
	}

	// Resumed at once: admitted one at a time, soaked, rolled back by ro4's refusal.
	stopTrace := traceRollout(fb)
	defer func() {
		for _, line := range stopTrace() {
			t.Logf("rollout: %s", line)
		}
	}()
	resumed := time.Now()
	resumeAtOnce(g, members[1:]...)
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutRolledBack), fleet.RolloutRevisions(1, 2), HaveField("Rollout.FailedRevision", BeEquivalentTo(2)),
		HaveField("Rollout.Stage", "rest"), HaveField("Rollout.Message", ContainSubstring("member ro4 failed revision 2"))))
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)))
	t.Logf("resumed → rolled back: %v", time.Since(resumed).Round(time.Millisecond))

	// From the audit logs: the canary written once before the resume; then ro2, ro3 and ro4 one
	// after another, each once for v2 and once for the rollback; ro5 never.
	auditBarrier(g, members...)
	writes := map[string][]controlplane.Write{}
	for _, m := range members {
		writes[m] = bundleWrites(g, m, fb, changed)
		t.Logf("%s: the hub's writes of the placed bundle since the template change: %v", m, writeTimes(writes[m]))
	}
	g.Expect(writes["ro1"]).To(HaveLen(2), "the canary: v2, then the rollback")
	g.Expect(writes["ro1"][0].At).To(BeTemporally("<", resumed))
	g.Expect(writes["ro5"]).To(BeEmpty(), "ro5 is never written: the rollout rolled back before it was admitted")
	for _, m := range []string{"ro2", "ro3", "ro4"} {
		g.Expect(writes[m]).To(HaveLen(2), "%s: v2, then the rollback", m)
		g.Expect(writes[m][0].At).To(BeTemporally(">=", resumed), "%s written after it was resumed", m)
	}
	// Stage mid's members in the order they were admitted (the hub may see ro3 resumed first).
	first, second := "ro2", "ro3"
	if writes["ro3"][0].At.Before(writes["ro2"][0].At) {
		first, second = "ro3", "ro2"
	}
	reported := firstStatusAfter(g, first, fb, writes[first][0].At)
	g.Expect(writes[second][0].At).To(BeTemporally(">", reported),
		"%s written only once %s (maxConcurrency 1) reported its bundle: %s written %s, reported %s", second, first,
		first, writes[first][0].At.Format(time.StampMilli), reported.Format(time.StampMilli))
	g.Expect(writes["ro4"][0].At).To(BeTemporally(">=", writes[second][0].At.Add(soak)), "ro4 written no sooner than stage mid's soak after %s", second)
	t.Logf("written after the resume: ro2 %v, ro3 %v, ro4 %v", writes["ro2"][0].At.Sub(resumed).Round(time.Millisecond),
		writes["ro3"][0].At.Sub(resumed).Round(time.Millisecond), writes["ro4"][0].At.Sub(resumed).Round(time.Millisecond))
}
