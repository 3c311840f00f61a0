package tenancy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The members the sets count.
const (
	memberA = "member-a"
	memberB = "member-b"
)

// createClusterSet creates a ClusterSet of the selector, deleted when the test ends.
func createClusterSet(t *testing.T, name string, selector metav1.LabelSelector) *hubv1alpha1.ClusterSet {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	set := &hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hubv1alpha1.ClusterSetSpec{ClusterSelector: selector}}
	g.Expect(hub.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(hub.Delete(ctx, set))).To(Succeed()) })
	return set
}

// clusterSet polls a ClusterSet.
func clusterSet(name string) func(Gomega) *hubv1alpha1.ClusterSet {
	return func(g Gomega) *hubv1alpha1.ClusterSet {
		set := &hubv1alpha1.ClusterSet{}
		g.Expect(hub.Get(context.Background(), client.ObjectKey{Name: name}, set)).To(Succeed())
		return set
	}
}

// labelMember sets a label of a member's MemberCluster.
func labelMember(g Gomega, name, key, value string) {
	patch := []byte(`{"metadata":{"labels":{"` + key + `":"` + value + `"}}}`)
	g.Expect(hub.Patch(context.Background(), &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}},
		client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// TestClusterSetCountsItsMembers: a ClusterSet's status says how many members its selector
// selects, following the members' labels, for its generation; an invalid selector is
// Ready=False InvalidSelector and selects none, until it is fixed.
func TestClusterSetCountsItsMembers(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	createMember(t, memberA)
	createMember(t, memberB)

	createClusterSet(t, "everyone", metav1.LabelSelector{})
	prod := createClusterSet(t, "prod", metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}})
	g.Eventually(clusterSet("everyone")).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Status.Clusters", BeEquivalentTo(2)),
		HaveField("Status.Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ClusterSetSelectingReason)),
		HaveField("Status.Conditions", ContainElement(HaveField("Message", ContainSubstring("selects 2 members"))))))
	g.Eventually(clusterSet("prod")).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Status.Clusters", BeEquivalentTo(0)), HaveField("Status.ObservedGeneration", prod.Generation),
		HaveField("Status.Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ClusterSetSelectingReason))))

	// A member relabelled joins the set.
	labelMember(g, memberA, "env", "prod")
	g.Eventually(clusterSet("prod")).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Clusters", BeEquivalentTo(1)))

	// An operator the API server lets through but no selector knows: nothing is selected.
	set := clusterSet("prod")(g)
	set.Spec.ClusterSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}
	g.Expect(hub.Update(ctx, set)).To(Succeed())
	g.Eventually(clusterSet("prod")).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Status.Clusters", BeEquivalentTo(0)), HaveField("Status.ObservedGeneration", set.Generation),
		HaveField("Status.Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.InvalidSelectorReason))))

	set = clusterSet("prod")(g)
	set.Spec.ClusterSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}}
	g.Expect(hub.Update(ctx, set)).To(Succeed())
	g.Eventually(clusterSet("prod")).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Status.Clusters", BeEquivalentTo(1)), HaveField("Status.ObservedGeneration", set.Generation),
		HaveField("Status.Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ClusterSetSelectingReason))))

	// A member that leaves leaves the sets.
	g.Expect(hub.Delete(ctx, &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: memberB}})).To(Succeed())
	g.Eventually(clusterSet("everyone")).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Clusters", BeEquivalentTo(1)))
}

// TestClusterSetBindingFollowsItsSet: a binding of a set that does not exist is Ready=False
// ClusterSetNotFound, naming the set; it is Bound once the set is created, and not found again
// once the set is deleted.
func TestClusterSetBindingFollowsItsSet(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	g.Expect(hub.Create(ctx, ns)).To(Succeed())
	binding := &hubv1alpha1.ClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "later"},
		Spec:       hubv1alpha1.ClusterSetBindingSpec{ClusterSet: "later"},
	}
	g.Expect(hub.Create(ctx, binding)).To(Succeed())
	bindingStatus := func(g Gomega) hubv1alpha1.ClusterSetBindingStatus {
		got := &hubv1alpha1.ClusterSetBinding{}
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(binding), got)).To(Succeed())
		return got.Status
	}
	notFound := And(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.ClusterSetNotFoundReason)),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring("ClusterSet later does not exist")))),
		HaveField("ObservedGeneration", binding.Generation))
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(notFound)

	set := createClusterSet(t, "later", metav1.LabelSelector{})
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ClusterSetBoundReason)))

	g.Expect(hub.Delete(ctx, set)).To(Succeed())
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(notFound)
}

// TestClusterSetBindingListsItsMembers: a binding's status lists the names and labels of the
// members its set selects, and counts them, following the members' labels and the set's
// selector; nothing once the set is gone.
func TestClusterSetBindingListsItsMembers(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	const memberC, memberD = "member-c", "member-d"
	createMember(t, memberC)
	createMember(t, memberD)
	labelMember(g, memberC, "team", "listed")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	g.Expect(hub.Create(ctx, ns)).To(Succeed())
	set := createClusterSet(t, "listed", metav1.LabelSelector{MatchLabels: map[string]string{"team": "listed"}})
	binding := &hubv1alpha1.ClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "listed"},
		Spec:       hubv1alpha1.ClusterSetBindingSpec{ClusterSet: "listed"},
	}
	g.Expect(hub.Create(ctx, binding)).To(Succeed())
	bindingStatus := func(g Gomega) hubv1alpha1.ClusterSetBindingStatus {
		got := &hubv1alpha1.ClusterSetBinding{}
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(binding), got)).To(Succeed())
		return got.Status
	}
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("ClusterCount", BeEquivalentTo(1)),
		HaveField("Clusters", Equal([]hubv1alpha1.BoundCluster{{Name: memberC, Labels: map[string]string{"team": "listed"}}}))))

	// A member relabelled joins, its labels with it.
	labelMember(g, memberD, "team", "listed")
	labelMember(g, memberD, "region", "eu")
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("ClusterCount", BeEquivalentTo(2)),
		HaveField("Clusters", Equal([]hubv1alpha1.BoundCluster{
			{Name: memberC, Labels: map[string]string{"team": "listed"}},
			{Name: memberD, Labels: map[string]string{"team": "listed", "region": "eu"}},
		}))))

	// The set selects otherwise.
	patch := []byte(`{"spec":{"clusterSelector":{"matchLabels":{"team":null,"region":"eu"}}}}`)
	g.Expect(hub.Patch(ctx, set, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Clusters", ConsistOf(HaveField("Name", memberD))))

	g.Expect(hub.Delete(ctx, set)).To(Succeed())
	g.Eventually(bindingStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Clusters", BeEmpty()), HaveField("ClusterCount", BeZero())))
}
