package placement_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// The staged rollout against real members: member-a is the canary (its ring label), member-b
// and member-c the rest. A canary that refuses the new revision (an admission policy in it)
// halts the rollout, or rolls it back; a canary whose bundle does not get Ready in time fails it
// at its progress deadline.

// rolloutSoak is the soak of the canary stage of these tests.
const rolloutSoak = 2 * time.Second

// rolloutMembers are the members of these tests, the canary first.
var rolloutMembers = []string{memberA, memberB, memberC}

// canaryThenRest is a rollout of two stages: canary (the members with ring=canary), soaking
// rolloutSoak, then rest (every selected member left).
func canaryThenRest(ring string, edit ...func(*hubv1alpha1.RolloutStrategy)) *hubv1alpha1.RolloutStrategy {
	s := &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{
		{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ring: "canary"}}, SoakTime: &metav1.Duration{Duration: rolloutSoak}},
		{Name: "rest", ClusterSelector: &metav1.LabelSelector{}},
	}}
	for _, e := range edit {
		e(s)
	}
	return s
}

// rolloutFixture makes a namespace in the three members, selects them by key and puts member-a
// in ring canary; it returns the namespace and the ring label.
func rolloutFixture(t *testing.T, key string) (ns, ring string) {
	t.Helper()
	ns, ring = newNamespace(t, rolloutMembers...), key+"-ring"
	for _, m := range rolloutMembers {
		labelMember(t, m, key, "yes")
	}
	labelMember(t, memberA, ring, "canary")
	return ns, ring
}

// stagedAtV1 creates FleetBundle ns/web at v1 in the three members (no rollout yet: at once),
// then gives it rollout and waits until the rollout of revision 1 reads Complete.
func stagedAtV1(t *testing.T, ns, key string, rollout *hubv1alpha1.RolloutStrategy) *hubv1alpha1.FleetBundle {
	t.Helper()
	g := NewWithT(t)
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), rolloutMembers...)))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout = rollout })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, int32(len(rolloutMembers))))
	return fb
}

// refusedByTheCanary installs in member-a an admission policy refusing ConfigMaps of ns saying
// "bad", changes fb's template to "bad" and waits until its status matches want. It returns the
// function removing the policy (which the test's cleanup calls too).
func refusedByTheCanary(t *testing.T, fb *hubv1alpha1.FleetBundle, want OmegaMatcher) (unrefuse func()) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	p := fleet.MessagePolicy{Name: "refuse-" + fb.Namespace, Namespace: fb.Namespace, Message: "bad"}
	g.Expect(p.Install(ctx, memberClients[memberA], timeout)).To(Succeed())
	t.Cleanup(func() { _ = p.Remove(context.Background(), memberClients[memberA], timeout) })
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "bad" })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(want, HaveField("UpdateRevision", BeEquivalentTo(2))))
	return func() { g.Expect(p.Remove(ctx, memberClients[memberA], timeout)).To(Succeed()) }
}

// placedState is what a member holds of a FleetBundle: the message of its ConfigMap, and the
// message and revision annotation of its placed bundle ("" where there is none).
type placedState struct {
	ConfigMap, Bundle, Revision string
}

func (p placedState) String() string {
	return fmt.Sprintf("{configMap %q, bundle %q, revision %q}", p.ConfigMap, p.Bundle, p.Revision)
}

// held is the placed state of a member holding revision with message, in its bundle and its
// ConfigMap.
func held(revision int64, message string) placedState {
	return placedState{ConfigMap: message, Bundle: message, Revision: strconv.FormatInt(revision, 10)}
}

// allHold maps each member to the same placed state.
func allHold(s placedState, members ...string) map[string]placedState {
	out := map[string]placedState{}
	for _, m := range members {
		out[m] = s
	}
	return out
}

// holding returns the placed state of each member, for Eventually and Consistently.
func holding(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]placedState {
	return func(g Gomega) map[string]placedState {
		out := map[string]placedState{}
		for _, m := range members {
			s := placedState{}
			cm := &corev1.ConfigMap{}
			switch err := memberClients[m].Get(context.Background(), client.ObjectKeyFromObject(fb), cm); {
			case apierrors.IsNotFound(err):
			case err != nil:
				g.Expect(err).NotTo(HaveOccurred())
			case cm.DeletionTimestamp == nil:
				s.ConfigMap = cm.Data[configbundlev1alpha1.MessageKey]
			}
			if b := placed(m, fb)(g); b != nil {
				s.Bundle, s.Revision = b.Spec.Message, b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation]
			}
			out[m] = s
		}
		return out
	}
}

// rolloutHalted matches the status of a rollout halted by failures.
func rolloutHalted() OmegaMatcher {
	return And(fleet.RolloutPhase(hubv1alpha1.RolloutHalted),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.RolloutHaltedReason),
		fleet.RolloutCondition(hubv1alpha1.StalledCondition, metav1.ConditionTrue, hubv1alpha1.RolloutHaltedReason),
		fleet.RolloutCondition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolloutHaltedReason))
}

// haltedByTheCanary matches the status of a rollout halted by the failure of member-a alone,
// which the status names.
func haltedByTheCanary() OmegaMatcher {
	return And(rolloutHalted(), HaveField("Rollout.Message", ContainSubstring(memberA)),
		HaveField("FailedClusters", ConsistOf(HaveField("Cluster", memberA))))
}

// kstatusOf reads FleetBundle fb as kstatus does.
func kstatusOf(fb *hubv1alpha1.FleetBundle) func(Gomega) kstatus.Status {
	return func(g Gomega) kstatus.Status {
		res, err := fleet.KStatus(context.Background(), hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		return res.Status
	}
}

// rolloutEvents polls the Events of reason on a FleetBundle.
func rolloutEvents(fb *hubv1alpha1.FleetBundle, reason string) func(Gomega) []eventsv1.Event {
	return func(g Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(hub.List(context.Background(), list, client.InNamespace(fb.Namespace))).To(Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "FleetBundle" && e.Regarding.Name == fb.Name && e.Reason == reason {
				out = append(out, e)
			}
		}
		return out
	}
}

// TestRolloutHaltsWhenTheCanaryRefuses: the canary refuses the new ConfigMap: the rollout halts
// (Ready=False RolloutHalted, Stalled=True, kstatus Failed, the canary alone in failedClusters, a
// Warning Event naming it) and no other member gets the change for longer than the soak; a
// fixed template then rolls out to all, the canary first.
func TestRolloutHaltsWhenTheCanaryRefuses(t *testing.T) {
	g := NewWithT(t)
	const key = "test.rollout/halt"
	ns, ring := rolloutFixture(t, key)
	fb := stagedAtV1(t, ns, key, canaryThenRest(ring))
	refusedByTheCanary(t, fb, haltedByTheCanary())
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.FailedStatus), "a halted rollout reads Failed")
	g.Expect(status(fb)(g)).To(And(fleet.RolloutRevisions(1, 2), HaveField("Clusters.Updated", BeEquivalentTo(1))))

	// The canary holds revision 2 (its bundle) and still publishes v1 (its ConfigMap, which the
	// policy keeps); the others keep revision 1, for longer than the soak.
	want := allHold(held(1, "v1"), rolloutMembers...)
	want[memberA] = placedState{ConfigMap: "v1", Bundle: "bad", Revision: "2"}
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))
	g.Consistently(func(g Gomega) map[string]placedState {
		g.Expect(status(fb)(g)).To(haltedByTheCanary())
		return holding(fb, rolloutMembers...)(g)
	}).WithTimeout(2*rolloutSoak+time.Second).WithPolling(interval).Should(Equal(want), "halted: no other member gets the change")
	g.Eventually(rolloutEvents(fb, hubv1alpha1.RolloutHaltedEvent)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring(memberA)))))

	// A fixed template (revision 3) rolls out to all, the canary first: the rest keep revision 1
	// while the canary soaks.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v3" })
	g.Eventually(holding(fb, memberA)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal(allHold(held(3, "v3"), memberA)))
	g.Expect(holding(fb, memberB, memberC)(g)).To(Equal(allHold(held(1, "v1"), memberB, memberC)), "the rest wait for the canary's soak")
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(3, "v3"), rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(3, 3))
	g.Eventually(kstatusOf(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal(kstatus.CurrentStatus))
}

// TestRolloutHaltedGoesOnWhenTheFailureClears: a halt is computed from facts: once the canary's
// policy is removed, its bundle gets Ready and the halted rollout goes on by itself to every
// member.
func TestRolloutHaltedGoesOnWhenTheFailureClears(t *testing.T) {
	g := NewWithT(t)
	const key = "test.rollout/unhalt"
	ns, ring := rolloutFixture(t, key)
	fb := stagedAtV1(t, ns, key, canaryThenRest(ring))
	unrefuse := refusedByTheCanary(t, fb, haltedByTheCanary())
	unrefuse()
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(2, "bad"), rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(2, 3))
}

// TestRolloutRollsBackTheCanary: with onFailure Rollback, the canary that refuses the new
// ConfigMap gets the previous revision back, Ready, and none of the others gets the new one; the
// rollout reads RolledBack with failedRevision (Ready=False, Stalled=True, kstatus Failed, a
// Warning Event naming the canary) and the failed revision is not placed again; a new template
// then rolls out.
func TestRolloutRollsBackTheCanary(t *testing.T) {
	g := NewWithT(t)
	const key = "test.rollout/rollback"
	ns, ring := rolloutFixture(t, key)
	fb := stagedAtV1(t, ns, key, canaryThenRest(ring, func(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }))
	rolledBack := And(fleet.RolloutPhase(hubv1alpha1.RolloutRolledBack),
		HaveField("Rollout.FailedRevision", BeEquivalentTo(2)), HaveField("Rollout.Message", ContainSubstring(memberA)),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.RolledBackReason),
		fleet.RolloutCondition(hubv1alpha1.StalledCondition, metav1.ConditionTrue, hubv1alpha1.RolledBackReason),
		fleet.RolloutCondition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolledBackReason))
	refusedByTheCanary(t, fb, And(rolledBack, fleet.RolloutRevisions(1, 2)))
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.FailedStatus), "a rolled-back rollout reads Failed")

	// The canary's bundle is back at revision 1 and Ready; nobody gets revision 2 again.
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), rolloutMembers...)))
	g.Eventually(func(g Gomega) bool {
		b := placed(memberA, fb)(g)
		return b != nil && meta.IsStatusConditionTrue(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the canary's bundle is Ready again")
	g.Consistently(func(g Gomega) map[string]placedState {
		g.Expect(status(fb)(g)).To(rolledBack)
		return holding(fb, rolloutMembers...)(g)
	}).WithTimeout(2*rolloutSoak+time.Second).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), rolloutMembers...)),
		"the failed revision is not placed again")
	g.Eventually(rolloutEvents(fb, hubv1alpha1.RolledBackEvent)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring(memberA)))))

	// A new template (revision 3) rolls out.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v3" })
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(3, "v3"), rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(3, 3))
}

// TestRolloutProgressDeadline: an updated member whose bundle does not get Ready within
// progressDeadline fails the rollout: the first revision, placed in the canary whose namespace
// holds an earlier bundle's ConfigMap being deleted, is not Ready there (and not failed) until
// the deadline; then the rollout halts (a first revision has nothing to roll back to) with the
// canary in failedClusters as ProgressDeadlineExceeded, and no other member gets the bundle.
// Once the garbage goes, the canary is Ready and the rollout goes on by itself.
func TestRolloutProgressDeadline(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, deadline = "test.rollout/deadline", 3 * time.Second
	ns, ring := rolloutFixture(t, key)
	release := holdEarlierConfigMap(t, memberA, ns, "web")
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: selecting(key),
			Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "v1"}},
			Rollout: canaryThenRest(ring, func(s *hubv1alpha1.RolloutStrategy) {
				s.Stages[0].SoakTime = &metav1.Duration{Duration: time.Second}
				s.ProgressDeadline = &metav1.Duration{Duration: deadline}
			}),
		},
	}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })

	g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).ShouldNot(BeNil())
	placedAt := time.Now()
	g.Consistently(status(fb)).WithTimeout(deadline-time.Second).WithPolling(interval).Should(And(
		Not(fleet.RolloutPhase(hubv1alpha1.RolloutHalted)),
		HaveField("FailedClusters", Not(ContainElement(HaveField("Reason", hubv1alpha1.ProgressDeadlineExceededReason))))),
		"not failed before the deadline")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(rolloutHalted(), fleet.RolloutRevisions(0, 1),
		HaveField("FailedClusters", ConsistOf(failedCluster(memberA, hubv1alpha1.ProgressDeadlineExceededReason)))))
	g.Expect(time.Since(placedAt)).To(BeNumerically(">=", deadline-time.Second), "failed before its deadline")
	g.Expect(kstatusOf(fb)(g)).To(Equal(kstatus.FailedStatus))
	g.Consistently(holding(fb, rolloutMembers...)).WithTimeout(2*time.Second).WithPolling(interval).Should(Equal(map[string]placedState{
		memberA: {Bundle: "v1", Revision: "1"}, memberB: {}, memberC: {}}), "halted: nothing placed beyond the canary")

	release()
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(1, "v1"), rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 3))
}

// holdEarlierConfigMap makes, in a member, the ConfigMap ns/name of an earlier ConfigBundle of
// that name (its controller, with a uid that no longer exists) being deleted, held by a
// finalizer of the test's: a bundle placed there waits for it to go. It returns the function
// that lets it go (which the test's cleanup calls too).
func holdEarlierConfigMap(t *testing.T, member, ns, name string) (release func()) {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), memberClients[member]
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"test.configbundle.dev/hold"},
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
