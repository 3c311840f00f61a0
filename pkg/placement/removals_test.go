package placement_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// orphaned polls whether a member's ConfigMap of a FleetBundle's name is left with message and
// without the hub's ownership (no ownerReference, no hub.configbundle.dev/ label or annotation,
// no guard label), and whether its placed bundle is gone or going.
func orphaned(member string, fb *hubv1alpha1.FleetBundle, message string) func(Gomega) {
	return func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(memberClients[member].Get(context.Background(), client.ObjectKeyFromObject(fb), cm)).To(Succeed())
		g.Expect(cm.DeletionTimestamp).To(BeNil())
		g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, message))
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		for _, m := range []map[string]string{cm.Labels, cm.Annotations} {
			for k := range m {
				g.Expect(strings.HasPrefix(k, hubv1alpha1.HubPrefix) || k == configbundlev1alpha1.GuardLabel).To(BeFalse(), "key %s", k)
			}
		}
		g.Expect(cm.Labels).To(HaveKeyWithValue("team", "platform"), "the template's own labels stay")
		if b := placed(member, fb)(g); b != nil {
			g.Expect(b.DeletionTimestamp).NotTo(BeNil())
		}
	}
}

// finishOrphaning removes the orphan finalizer of a member's bundle, as the garbage collector
// these members lack would once it orphaned the ConfigMap.
func finishOrphaning(t *testing.T, member string, fb *hubv1alpha1.FleetBundle) {
	t.Helper()
	b := &configbundlev1alpha1.ConfigBundle{}
	if err := memberClients[member].Get(context.Background(), client.ObjectKeyFromObject(fb), b); apierrors.IsNotFound(err) {
		return
	}
	setFinalizers(NewWithT(t), member, fb, nil)
}

// TestOrphanLeavesTheConfigMap: with deletionPolicy Orphan, a member that leaves the selection
// and then every member when the FleetBundle is deleted keep the ConfigMap with its content,
// without the hub's ownership; an Orphaned Event names each member.
func TestOrphanLeavesTheConfigMap(t *testing.T) {
	g := NewWithT(t)
	const key = "test.removals/orphan"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "kept")
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.DeletionPolicy = hubv1alpha1.DeletionPolicyOrphan })
	t.Cleanup(func() { finishOrphaning(t, memberA, fb); finishOrphaning(t, memberB, fb) })
	for _, m := range []string{memberA, memberB} {
		g.Eventually(func(g Gomega) string {
			b := placed(m, fb)(g)
			g.Expect(b).NotTo(BeNil())
			return b.Annotations[hubv1alpha1.DeletionPolicyAnnotation]
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(string(hubv1alpha1.DeletionPolicyOrphan)))
		g.Eventually(holding(fb, m)).WithTimeout(timeout).WithPolling(interval).Should(HaveKeyWithValue(m, HaveField("ConfigMap", "kept")))
	}

	labelMember(t, memberB, key, "")
	g.Eventually(orphaned(memberB, fb, "kept")).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(rolloutEvents(fb, hubv1alpha1.OrphanedEvent)).WithTimeout(timeout).WithPolling(interval).Should(
		ContainElement(HaveField("Note", ContainSubstring("Member "+memberB))))
	g.Expect(holding(fb, memberA)(g)).To(HaveKeyWithValue(memberA, HaveField("Bundle", "kept")), "the member still selected keeps its bundle")

	deleteFleetBundle(g, fb)
	g.Eventually(orphaned(memberA, fb, "kept")).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Consistently(orphaned(memberB, fb, "kept")).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
}

// bundles polls the revision of the bundle each member holds of a FleetBundle ("" if none).
func bundles(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		out := map[string]string{}
		for m, s := range holding(fb, members...)(g) {
			out[m] = s.Revision
		}
		return out
	}
}

// removalHeld matches the status of a FleetBundle whose removals are held.
func removalHeld(count, cause string) OmegaMatcher {
	return And(fleet.RolloutPhase(hubv1alpha1.RolloutRemovalHeld),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.RemovalHeldReason),
		WithTransform(func(st hubv1alpha1.FleetBundleStatus) string {
			return meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition).Message
		}, And(ContainSubstring(count), ContainSubstring(cause))))
}

// TestRemovalHeldWhenABindingGoes: deleting the binding that selects the three members, with
// maxRemovals 1, removes nothing and says RemovalHeld (how many, and why); binding the set again
// clears it; deleting it again and approving the held removals removes the bundle, stage by
// stage: the canary first, the others once its soak passed.
func TestRemovalHeldWhenABindingGoes(t *testing.T) {
	g := NewWithT(t)
	const key = "test.removals/held"
	ns := newUnboundNamespace(t, rolloutMembers...)
	set := newClusterSet(t, key)
	bind(t, ns, set)
	ring := key + "-ring"
	for _, m := range rolloutMembers {
		labelMember(t, m, key, "yes")
	}
	labelMember(t, memberA, ring, "canary")
	fb := newFleetBundle(t, ns, &metav1.LabelSelector{}, "v1")
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout = canaryThenRest(ring, func(r *hubv1alpha1.RolloutStrategy) { r.MaxRemovals = ptr.To(intstr.FromInt32(1)) })
	})
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 3))
	all := allHold(held(1, "v1"), rolloutMembers...)
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all))

	unbind(g, ns, set)
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(removalHeld("3 members", "the binding "+ns+"/"+set+" was deleted"))
	g.Consistently(holding(fb, rolloutMembers...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(all))
	g.Expect(rolloutEvents(fb, hubv1alpha1.RemovalHeldEvent)(g)).To(HaveLen(1))

	bind(t, ns, set)
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		HaveField("Rollout.Removals", BeNil())))

	unbind(g, ns, set)
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(removalHeld("3 members", "was deleted"))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout.RemovalApprovals = append(s.Rollout.RemovalApprovals, hubv1alpha1.RemovalApproval{
			RemovalSet: status(fb)(g).Rollout.Removals.RemovalSet, ApprovedBy: "alice"})
	})
	// These members have no garbage collector: the ConfigMap of a bundle removed stays.
	g.Eventually(bundles(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{memberA: "", memberB: "1", memberC: "1"}))
	g.Consistently(bundles(fb, memberB, memberC)).WithTimeout(rolloutSoak/2).WithPolling(interval).Should(Equal(
		map[string]string{memberB: "1", memberC: "1"}), "the rest waits for the canary's soak")
	g.Eventually(bundles(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{memberA: "", memberB: "", memberC: ""}))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Rollout.Removals", BeNil()))
}

// TestFleetBundleRemovalsAdmission: deletionPolicy is Delete or Orphan; maxRemovals an integer
// >= 0 or a percentage; a rollout may hold maxRemovals alone, without stages.
func TestFleetBundleRemovalsAdmission(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	tests := []struct {
		name    string
		policy  hubv1alpha1.DeletionPolicy
		rollout *hubv1alpha1.RolloutStrategy
		refused string // "" if admitted
	}{
		{name: "Orphan", policy: hubv1alpha1.DeletionPolicyOrphan},
		{name: "Delete", policy: hubv1alpha1.DeletionPolicyDelete},
		{name: "another policy", policy: "Keep", refused: "spec.deletionPolicy"},
		{name: "maxRemovals alone", rollout: &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromInt32(2))}},
		{name: "a percentage", rollout: &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromString("10%"))}},
		{name: "a negative number", rollout: &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromInt32(-1))}, refused: "maxRemovals must be"},
		{name: "beyond 100%", rollout: &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromString("150%"))}, refused: "maxRemovals must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: hubv1alpha1.FleetBundleSpec{
				ClusterSelector: selecting("test.admission/nobody"), DeletionPolicy: tt.policy, Rollout: tt.rollout,
				Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "v1"}},
			}}
			err := hub.Create(context.Background(), fb, client.DryRunAll)
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("want admitted, got %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.refused) {
				t.Fatalf("want Invalid naming %q, got %v", tt.refused, err)
			}
		})
	}
}

// TestMaxRemovalsWithoutStages: a rollout with maxRemovals alone stages nothing (a new revision
// reaches every member) and still holds a selector change that would remove the bundle from 3
// of 3 members; reverting the selector clears the hold, and nothing was removed.
func TestMaxRemovalsWithoutStages(t *testing.T) {
	g := NewWithT(t)
	const key = "test.removals/unstaged"
	ns, _ := rolloutFixture(t, key)
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout = &hubv1alpha1.RolloutStrategy{MaxRemovals: ptr.To(intstr.FromString("50%"))}
	})
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 3))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "v2" })
	g.Eventually(holding(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(allHold(held(2, "v2"), rolloutMembers...)))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSelector = selecting(key + "-nobody") })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(removalHeld("3 members", "spec.clusterSelector no longer selects"))
	g.Consistently(bundles(fb, rolloutMembers...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(map[string]string{memberA: "2", memberB: "2", memberC: "2"}))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.ClusterSelector = selecting(key) })
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), HaveField("Rollout.Removals", BeNil())))
	g.Expect(bundles(fb, rolloutMembers...)(g)).To(Equal(map[string]string{memberA: "2", memberB: "2", memberC: "2"}))
}
