package fleet_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// TestMemberClusterReportsTheProvidersFacts: a member the provider knows gets a MemberCluster,
// labelled as the hub's, naming its Secret, with the provider's facts (readiness, version,
// cluster id, credential expiry) and its bundles counted from the member's cache; its Ready
// transition is announced by an Event.
func TestMemberClusterReportsTheProvidersFacts(t *testing.T) {
	g := NewWithT(t)
	newBundle(t, memberA, "ok", metav1.ConditionTrue, "Applied")
	newBundle(t, memberA, "broken", metav1.ConditionFalse, "ConfigMapConflict")
	state := connected(memberA, 90*24*time.Hour)
	join(t, memberA, state)

	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Conditions", And(
			haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason),
			haveCondition(hubv1alpha1.CredentialsValidCondition, metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason))),
		HaveField("KubernetesVersion", "v1.36.3"), HaveField("ClusterID", "uid-"+memberA),
		HaveField("CredentialsExpiry", HaveField("Time", BeTemporally("==", state.CredentialsExpiry))),
		HaveField("LastSeenTime", Not(BeNil())),
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 2, Ready: 1, Failed: 1}),
		HaveField("FailedBundles", ConsistOf(And(HaveField("Name", "broken"), HaveField("Reason", "ConfigMapConflict"))))))
	mc := memberCluster(memberA)(g)
	g.Expect(mc.Labels).To(HaveKeyWithValue(hubv1alpha1.ManagedByLabel, hubv1alpha1.FieldOwner))
	g.Expect(mc.Spec.SecretRef).To(Equal(hubv1alpha1.SecretReference{Namespace: secretNamespace, Name: memberA}))
	g.Eventually(memberEvents(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		ContainElement(And(HavePrefix("Normal "+hubv1alpha1.ConnectedReason), ContainSubstring(memberA))))

	// Another bundle is counted.
	newBundle(t, memberA, "more", metav1.ConditionTrue, "Applied")
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 3, Ready: 2, Failed: 1}))
}

// TestMemberClusterFollowsTheProvider: the MemberCluster follows the provider's State: an
// unreachable member is Ready=False with the provider's reason (a Warning Event) and keeps its
// last counts; a credential about to expire, or expired, is CredentialsValid=False; the labels
// users set are kept through every status write.
func TestMemberClusterFollowsTheProvider(t *testing.T) {
	g := NewWithT(t)
	newBundle(t, memberB, "ok", metav1.ConditionTrue, "Applied")
	state := connected(memberB, 90*24*time.Hour)
	join(t, memberB, state)
	g.Eventually(memberStatus(memberB)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason)),
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 1, Ready: 1})))
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := memberCluster(memberB)(g)
		mc.Labels["env"] = "prod"
		return hub.Update(context.Background(), mc)
	})).To(Succeed())

	members.Set(memberB, unreachable(state))
	g.Eventually(memberStatus(memberB)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.UnreachableReason)),
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 1, Ready: 1})))
	g.Eventually(memberEvents(memberB)).WithTimeout(timeout).WithPolling(interval).Should(
		ContainElement(And(HavePrefix("Warning "+hubv1alpha1.UnreachableReason), ContainSubstring("Probe failed"))))

	soon := connected(memberB, 24*time.Hour)
	members.Set(memberB, soon)
	g.Eventually(memberStatus(memberB)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions", And(
		haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason),
		haveCondition(hubv1alpha1.CredentialsValidCondition, metav1.ConditionFalse, hubv1alpha1.ExpiresSoonReason))))
	expired := soon
	expired.CredentialsExpiry = time.Now().Add(-time.Hour).Truncate(time.Second)
	members.Set(memberB, expired)
	g.Eventually(memberStatus(memberB)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions",
		haveCondition(hubv1alpha1.CredentialsValidCondition, metav1.ConditionFalse, hubv1alpha1.ExpiredReason)))
	g.Expect(memberCluster(memberB)(g).Labels).To(HaveKeyWithValue("env", "prod"), "labels set by users are kept")
}

// TestForbiddenMemberIsStillCounted: a member that refuses the hub a right is Ready=False
// Forbidden with the provider's message, and its bundles are still counted from its cache (an
// Unreachable member keeps its last counts): a bundle failing meanwhile is counted as failed.
func TestForbiddenMemberIsStillCounted(t *testing.T) {
	g := NewWithT(t)
	newBundle(t, memberA, "ok", metav1.ConditionTrue, "Applied")
	state := connected(memberA, 0)
	join(t, memberA, state)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 1, Ready: 1}))

	forbidden := state
	forbidden.Ready, forbidden.Reason, forbidden.Message = false, hubv1alpha1.ForbiddenReason, "the hub's credential may not update configmaps"
	members.Set(memberA, forbidden)
	newBundle(t, memberA, "refused", metav1.ConditionFalse, hubv1alpha1.ForbiddenReason)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Conditions", ContainElement(And(
			HaveField("Type", hubv1alpha1.ReadyCondition), HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", hubv1alpha1.ForbiddenReason), HaveField("Message", ContainSubstring("may not update configmaps"))))),
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 2, Ready: 1, Failed: 1}),
		HaveField("FailedBundles", ConsistOf(And(HaveField("Name", "refused"), HaveField("Reason", hubv1alpha1.ForbiddenReason))))))
}

// TestCRDMissingMemberIsStillCounted: a member whose CRD was deleted is Ready=False
// CRDMissing, and its counts follow its cache, which loses the bundles the deletion deletes:
// they drop at once, not when the member is Ready again.
func TestCRDMissingMemberIsStillCounted(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newBundle(t, memberA, "doomed", metav1.ConditionTrue, "Applied")
	state := connected(memberA, 0)
	join(t, memberA, state)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 1, Ready: 1}))

	missing := state
	missing.Ready, missing.Reason, missing.Message = false, hubv1alpha1.CRDMissingReason, "The member's CRD configbundles.configbundle.dev was deleted"
	members.Set(memberA, missing)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.CRDMissingReason)))
	list := &configbundlev1alpha1.ConfigBundleList{}
	g.Expect(memberClients[memberA].List(ctx, list)).To(Succeed())
	for i := range list.Items {
		if list.Items[i].Name == "doomed" { // as the CRD's deletion deletes every bundle
			g.Expect(memberClients[memberA].Delete(ctx, &list.Items[i])).To(Succeed())
		}
	}
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.CRDMissingReason)),
		HaveField("Bundles", hubv1alpha1.BundleCounts{})))
}

// TestMemberClusterGoesWithItsMember: a member whose Secret goes loses its MemberCluster; a
// MemberCluster deleted by hand while its member stays is created again.
func TestMemberClusterGoesWithItsMember(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	join(t, memberA, connected(memberA, 0))
	first := memberCluster(memberA)
	g.Eventually(first).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Conditions",
		And(haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason),
			haveCondition(hubv1alpha1.CredentialsValidCondition, metav1.ConditionUnknown, hubv1alpha1.ExpiryUnknownReason))))
	old := first(g)
	g.Expect(hub.Delete(ctx, old)).To(Succeed())
	g.Eventually(func(g Gomega) *hubv1alpha1.MemberCluster {
		mc := &hubv1alpha1.MemberCluster{}
		g.Expect(hub.Get(ctx, client.ObjectKey{Name: memberA}, mc)).To(Succeed())
		return mc
	}).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("UID", Not(Equal(old.UID))),
		HaveField("Status.Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason))))

	leave(g, memberA) // fails unless the MemberCluster is deleted
}

// setPaused sets a member's spec.paused, as `hub pause` and `hub resume` do.
func setPaused(g Gomega, name string, paused bool) {
	patch := []byte(`{"spec":{"paused":false}}`)
	if paused {
		patch = []byte(`{"spec":{"paused":true}}`)
	}
	g.Expect(hub.Patch(context.Background(), &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}},
		client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// TestPausedMember: a paused member is Paused=True with a Normal Event Paused, its Ready
// untouched, and counted in the Fleet's clusters.paused; resumed, it is Paused=False with a
// Normal Event Resumed. A member that starts unpaused gets no such Event.
//
// The member is none of the suite's (its bundles are not counted): no Event of an earlier test
// is about it.
func TestPausedMember(t *testing.T) {
	g, name := NewWithT(t), "member-paused"
	join(t, name, connected(name, 0))
	g.Eventually(memberStatus(name)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions", And(
		haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason),
		haveCondition(hubv1alpha1.PausedCondition, metav1.ConditionFalse, hubv1alpha1.NotPausedReason))))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 1, Ready: 1}))

	// The first status write records the member's Connected Event after any Event of its Paused
	// condition: once it is there, a member starting unpaused has had none.
	g.Eventually(memberEvents(name)).WithTimeout(timeout).WithPolling(interval).Should(
		ContainElement(HavePrefix("Normal " + hubv1alpha1.ConnectedReason)))
	g.Expect(memberEvents(name)(g)).NotTo(ContainElement(Or(
		HavePrefix("Normal "+hubv1alpha1.PausedReason+" "), HavePrefix("Normal "+hubv1alpha1.ResumedReason+" "))))

	setPaused(g, name, true)
	g.Eventually(memberStatus(name)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions", And(
		haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason),
		haveCondition(hubv1alpha1.PausedCondition, metav1.ConditionTrue, hubv1alpha1.PausedReason))))
	g.Eventually(memberEvents(name)).WithTimeout(timeout).WithPolling(interval).Should(
		ContainElement(And(HavePrefix("Normal "+hubv1alpha1.PausedReason+" "), ContainSubstring("Member "+name+" paused"))))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 1, Ready: 1, Paused: 1}), haveReason(hubv1alpha1.AllReadyReason)))

	setPaused(g, name, false)
	g.Eventually(memberStatus(name)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Conditions",
		haveCondition(hubv1alpha1.PausedCondition, metav1.ConditionFalse, hubv1alpha1.NotPausedReason)))
	g.Eventually(memberEvents(name)).WithTimeout(timeout).WithPolling(interval).Should(
		ContainElement(And(HavePrefix("Normal "+hubv1alpha1.ResumedReason+" "), ContainSubstring("Member "+name+" resumed"))))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 1, Ready: 1}))
}

// TestMemberClusterSaysWhetherItIsGuarded: the MemberCluster's Guarded condition is the
// provider's GuardState: True where the hub's admission policies are in place, False with
// GuardUnavailable where the member cannot have them; none where the provider keeps none.
func TestMemberClusterSaysWhetherItIsGuarded(t *testing.T) {
	g := NewWithT(t)
	state := connected(memberA, 0)
	join(t, memberA, state)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.ConnectedReason)))
	g.Expect(meta.FindStatusCondition(memberStatus(memberA)(g).Conditions, hubv1alpha1.GuardedCondition)).To(BeNil())

	state.Guard = spokeprovider.GuardState{Status: metav1.ConditionTrue, Reason: hubv1alpha1.GuardInstalledReason, Message: "in place"}
	members.Set(memberA, state)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.GuardedCondition, metav1.ConditionTrue, hubv1alpha1.GuardInstalledReason)))

	state.Guard = spokeprovider.GuardState{Status: metav1.ConditionFalse, Reason: hubv1alpha1.GuardUnavailableReason, Message: "no policies"}
	members.Set(memberA, state)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.GuardedCondition, metav1.ConditionFalse, hubv1alpha1.GuardUnavailableReason)))
}
