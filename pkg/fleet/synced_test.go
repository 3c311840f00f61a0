package fleet_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// TestMemberSyncedFollowsTheFirstFullReconcile: until the ConfigBundle reconciler has reconciled
// once every bundle a member held when it connected, its MemberCluster is Synced=False
// (Syncing) with the count left, and the Fleet is not Ready (MembersSyncing) though every
// member is; the end of it is seen with no event (the reconciles of unchanged bundles write
// nothing), and makes both Ready.
func TestMemberSyncedFollowsTheFirstFullReconcile(t *testing.T) {
	g := NewWithT(t)
	newBundle(t, memberA, "ok", metav1.ConditionTrue, "Applied")
	syncs.set(t, memberA, configbundle.Sync{Connected: true, Total: 20012, Left: 12000})
	join(t, memberA, connected(memberA, 0))

	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions", And(
		haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason),
		haveCondition(hubv1alpha1.SyncedCondition, metav1.ConditionFalse, hubv1alpha1.SyncingReason),
		ContainElement(HaveField("Message", "12000 of 20012 ConfigBundles left to reconcile since the member connected")))))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 1, Ready: 1}),
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.MembersSyncingReason)),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring(memberA))))))

	syncs.set(t, memberA, configbundle.Sync{Connected: true, Total: 20012, Left: 3})
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions",
		ContainElement(HaveField("Message", "3 of 20012 ConfigBundles left to reconcile since the member connected"))), "the count goes down")

	syncs.set(t, memberA, configbundle.Sync{Connected: true, Total: 20012})
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions",
		haveCondition(hubv1alpha1.SyncedCondition, metav1.ConditionTrue, hubv1alpha1.AllReconciledReason)))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason)))
	g.Expect(meta.FindStatusCondition(memberStatus(memberA)(g).Conditions, hubv1alpha1.SyncedCondition).Message).To(
		Equal("All 20012 ConfigBundles the member held when it connected have been reconciled since"))
}
