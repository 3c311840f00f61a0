package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// placedInMembers returns a function listing the suite's members that hold a bundle of fb.
func placedInMembers(fb *hubv1alpha1.FleetBundle) func(Gomega) []string {
	return func(g Gomega) []string {
		out := []string{}
		for _, m := range []string{memberA, memberB, memberC} {
			if placed(m, fb)(g) != nil {
				out = append(out, m)
			}
		}
		return out
	}
}

// TestPlacementFollowsItsClusterSets: a FleetBundle selecting every member ({}) follows the sets
// bound to its namespace as they change: a binding of a set that does not exist places nothing
// until the set is created; a set's selector changed moves what it let be placed; a bound set
// deleted removes what it let be placed, and the other set's member keeps its bundle.
func TestPlacementFollowsItsClusterSets(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, laterKeyB, laterKeyC = "test.placement/sets", "test.placement/sets-later-b", "test.placement/sets-later-c"
	ns := newUnboundNamespace(t, memberA, memberB, memberC)
	labelMember(t, memberA, key, "yes")
	bind(t, ns, newClusterSet(t, key))
	fb := newFleetBundle(t, ns, &metav1.LabelSelector{}, "v1")
	g.Eventually(placedInMembers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{memberA}))

	// A binding of a set that does not exist yet binds nothing.
	const later = "test-placement-sets-later"
	bind(t, ns, later)
	labelMember(t, memberB, laterKeyB, "yes")
	labelMember(t, memberC, laterKeyC, "yes")
	g.Consistently(placedInMembers(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{memberA}))
	set := fleet.NewClusterSet(later, map[string]string{laterKeyB: "yes"})
	g.Expect(hub.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(hub.Delete(context.Background(), set)) })
	g.Eventually(placedInMembers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{memberA, memberB}), "the set created")

	// Its selector changed: member-c instead of member-b.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cs := &hubv1alpha1.ClusterSet{}
		if err := hub.Get(ctx, client.ObjectKey{Name: later}, cs); err != nil {
			return err
		}
		cs.Spec.ClusterSelector = metav1.LabelSelector{MatchLabels: map[string]string{laterKeyC: "yes"}}
		return hub.Update(ctx, cs)
	})).To(Succeed())
	g.Eventually(placedInMembers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{memberA, memberC}), "the set's selector changed")

	// The set deleted: member-c loses its bundle, member-a keeps its own.
	g.Expect(hub.Delete(ctx, set)).To(Succeed())
	g.Eventually(placedInMembers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]string{memberA}), "the set deleted")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), haveCounts(hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1})))
}
