package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Members away from placement: one that stops answering for a while, and one that leaves the
// fleet.

// TestPlacementMemberAwayDelaysNobody: while a selected member does not answer, a template update
// reaches the others and not it, and it catches up when it is back; a
// FleetBundle deleted while a member is away is gone at once, and its bundle in that member is
// removed when the member is back.
func TestPlacementMemberAwayDelaysNobody(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/away"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "before")
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("before"), m)
	}
	// (That a member not Ready is counted failed with its reason is TestPlacementCountsMembersNotReady's.)
	away := func() {
		members.Set(memberB, spokeprovider.State{Reason: hubv1alpha1.UnreachableReason, Message: "Probe failed"})
	}
	t.Cleanup(func() { members.Set(memberB, connected()) })

	away()
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "after" })
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("after"))
	g.Consistently(message(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("before"), "nothing is written to a member away")
	members.Set(memberB, connected())
	g.Eventually(message(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("after"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))

	// Deleted while member-b is away: the FleetBundle goes at once; member-b's bundle when it is
	// back.
	away()
	deleteFleetBundle(g, fb)
	g.Expect(placed(memberA, fb)(g)).To(BeNil())
	g.Expect(placed(memberB, fb)(g)).NotTo(BeNil(), "a member away keeps its bundle meanwhile")
	members.Set(memberB, connected())
	g.Eventually(placed(memberB, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil(), "the leftover is removed when the member is back")
}

// TestPlacementLeavesAMemberThatLeftUntouched: a member that leaves the fleet (its MemberCluster
// gone, the provider forgetting it) keeps the bundle placed in it, untouched, and is no longer
// counted.
func TestPlacementLeavesAMemberThatLeftUntouched(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.placement/left"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	labelMember(t, memberB, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "stay")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
	before := placed(memberB, fb)(g)

	mc := &hubv1alpha1.MemberCluster{}
	g.Expect(hub.Get(ctx, client.ObjectKey{Name: memberB}, mc)).To(Succeed())
	members.Forget(memberB)
	g.Expect(hub.Delete(ctx, mc)).To(Succeed())
	t.Cleanup(func() {
		back := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: memberB, Labels: mc.Labels}, Spec: mc.Spec}
		delete(back.Labels, key)
		g := NewWithT(t)
		g.Eventually(func() error {
			err := hub.Create(context.Background(), back)
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		members.Set(memberB, connected())
	})

	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1})))
	g.Consistently(func(g Gomega) string {
		b := placed(memberB, fb)(g)
		g.Expect(b).NotTo(BeNil(), "the bundle placed in a member that left stays")
		return b.ResourceVersion
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(before.ResourceVersion), "nothing is written to a member that left")
}
