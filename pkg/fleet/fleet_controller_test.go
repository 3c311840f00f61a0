package fleet_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleet"
)

// TestFleetRollsUpTheMembers: the Fleet sums up the MemberClusters, with a reason for each way
// it is not Ready, and a heartbeat that the gate trusts only while it is fresh.
func TestFleetRollsUpTheMembers(t *testing.T) {
	g := NewWithT(t)
	ready := func(reason string) OmegaMatcher {
		return WithTransform(func(st hubv1alpha1.FleetStatus) string {
			if c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition); c != nil {
				return c.Reason
			}
			return ""
		}, Equal(reason))
	}
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		ready(hubv1alpha1.NoMembersReason), HaveField("Clusters", hubv1alpha1.ClusterCounts{}), HaveField("HeartbeatTime", Not(BeNil()))))

	newBundle(t, memberA, "ok", metav1.ConditionTrue, "Applied")
	newBundle(t, memberB, "ok", metav1.ConditionTrue, "Applied")
	a, b := connected(memberA, 0), connected(memberB, 0)
	join(t, memberA, a)
	join(t, memberB, b)
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		ready(hubv1alpha1.AllReadyReason),
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 2, Ready: 2}),
		HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 2, Ready: 2})))
	gate := func() error {
		f := &hubv1alpha1.Fleet{}
		g.Expect(hub.Get(context.Background(), client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
		return fleet.Gate(f, time.Now(), 10*heartbeatInterval)
	}
	g.Expect(gate()).To(Succeed())
	// The heartbeat is refreshed with nothing else changing: the gate stays open.
	beat := fleetStatus(g).HeartbeatTime.Time
	g.Eventually(func(g Gomega) time.Time { return fleetStatus(g).HeartbeatTime.Time }).
		WithTimeout(timeout).WithPolling(interval).Should(BeTemporally(">", beat))
	g.Expect(gate()).To(Succeed())
	// A heartbeat older than maxAge closes it.
	f := &hubv1alpha1.Fleet{}
	g.Expect(hub.Get(context.Background(), client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
	g.Expect(fleet.Gate(f, time.Now().Add(time.Hour), time.Minute)).To(And(MatchError(fleet.ErrNotHealthy), MatchError(ContainSubstring("heartbeat"))))

	members.Set(memberB, unreachable(b))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		ready(hubv1alpha1.MembersNotReadyReason), HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 2, Ready: 1}),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring(memberB+" ("+hubv1alpha1.UnreachableReason+")"))))))
	g.Expect(gate()).To(And(MatchError(fleet.ErrNotHealthy), MatchError(ContainSubstring(hubv1alpha1.MembersNotReadyReason))))

	members.Set(memberB, b)
	newBundle(t, memberA, "broken", metav1.ConditionFalse, "ConfigMapConflict")
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		ready(hubv1alpha1.BundlesFailedReason), HaveField("Bundles", hubv1alpha1.BundleCounts{Total: 3, Ready: 2, Failed: 1}),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring(memberA+" (1)"))))))
	g.Expect(gate()).To(MatchError(fleet.ErrNotHealthy))
}

// TestFleetRollsUpTheFleetBundles: the Fleet counts the FleetBundles of all namespaces and
// follows their status as placement writes it (the test plays placement): one turning failed
// makes the Fleet FleetBundlesFailed, naming it, and its recovery makes it AllReady again.
func TestFleetRollsUpTheFleetBundles(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	join(t, memberA, connected(memberA, 0))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fleetbundles-"}}
	g.Expect(hub.Create(ctx, ns)).To(Succeed())
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{},
			Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello"}}},
	}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(hub.Delete(ctx, fb))).To(Succeed()) })
	// placed sets the FleetBundle's status as placement would, for its current generation.
	placed := func(status metav1.ConditionStatus, reason string, counts hubv1alpha1.PlacementCounts) {
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(fb), fb)).To(Succeed())
		fb.Status.ObservedGeneration, fb.Status.Clusters = fb.Generation, counts
		meta.SetStatusCondition(&fb.Status.Conditions, metav1.Condition{Type: hubv1alpha1.ReadyCondition, Status: status, Reason: reason, Message: "set by the test"})
		g.Expect(hub.Status().Update(ctx, fb)).To(Succeed())
	}

	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		haveReason(hubv1alpha1.AllReadyReason), HaveField("FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 1}),
		HaveField("HeartbeatIntervalSeconds", BeEquivalentTo(heartbeatInterval/time.Second))), "not reconciled yet: neither ready nor failed")
	placed(metav1.ConditionTrue, hubv1alpha1.AllReadyReason, hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1})
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		haveReason(hubv1alpha1.AllReadyReason), HaveField("FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 1, Ready: 1})))

	placed(metav1.ConditionFalse, hubv1alpha1.ClustersFailedReason, hubv1alpha1.PlacementCounts{Selected: 1, Failed: 1})
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		haveReason(hubv1alpha1.FleetBundlesFailedReason), HaveField("FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 1, Failed: 1}),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring(ns.Name+"/web ("+hubv1alpha1.ClustersFailedReason+")"))))))
	f := &hubv1alpha1.Fleet{}
	g.Expect(hub.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
	g.Expect(fleet.Gate(f, time.Now(), 10*heartbeatInterval)).To(MatchError(ContainSubstring(hubv1alpha1.FleetBundlesFailedReason)))

	placed(metav1.ConditionTrue, hubv1alpha1.AllReadyReason, hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1})
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(And(
		haveReason(hubv1alpha1.AllReadyReason), HaveField("FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 1, Ready: 1})))

	// A spec change the hub has not computed yet: no longer ready, not failed.
	g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(fb), fb)).To(Succeed())
	fb.Spec.Template.Spec.Message = "changed"
	g.Expect(hub.Update(ctx, fb)).To(Succeed())
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(HaveField("FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 1}))

	g.Expect(hub.Delete(ctx, fb)).To(Succeed())
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(HaveField("FleetBundles", hubv1alpha1.FleetBundleCounts{}))
}

// TestFleetCountsUnownedMembers: a healthy hub owns every member it reports (status.unowned 0),
// and a MemberCluster whose status.replica names a replica that is gone counts as unowned, in
// status and in configbundle_fleet_members_unowned, until it is gone.
func TestFleetCountsUnownedMembers(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	join(t, memberA, connected(memberA, 0))
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 1, Ready: 1}))
	g.Expect(unownedMetric()).To(BeZero())

	// A member the provider has not admitted (its Secret is there, it has no State): the hub
	// leaves its MemberCluster alone, and its status.replica names a replica that is gone.
	const orphan = "orphan"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: orphan}}
	g.Expect(hub.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { leave(NewWithT(t), orphan) })
	// Until the hub's cache has the Secret, the hub deletes the MemberCluster as stale: create
	// it again until it stays.
	g.Eventually(func(g Gomega) hubv1alpha1.ClusterCounts {
		mc := &hubv1alpha1.MemberCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: orphan}, mc); apierrors.IsNotFound(err) {
			mc = &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: orphan},
				Spec: hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: secretNamespace, Name: orphan}}}
			g.Expect(hub.Create(ctx, mc)).To(Succeed())
		} else {
			g.Expect(err).NotTo(HaveOccurred())
		}
		if mc.Status.Replica != "hub-gone" {
			mc.Status.Replica = "hub-gone"
			g.Expect(hub.Status().Update(ctx, mc)).To(Succeed())
		}
		return fleetStatus(g).Clusters
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.ClusterCounts{Total: 2, Ready: 1, Unowned: 1}))
	g.Expect(unownedMetric()).To(BeEquivalentTo(1))

	leave(g, orphan)
	g.Eventually(fleetStatus).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Clusters", hubv1alpha1.ClusterCounts{Total: 1, Ready: 1}))
	g.Expect(unownedMetric()).To(BeZero())
}

// unownedMetric reads configbundle_fleet_members_unowned from controller-runtime's registry.
func unownedMetric() float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == "configbundle_fleet_members_unowned" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// haveReason matches a Fleet status whose Ready condition has reason.
func haveReason(reason string) OmegaMatcher {
	return WithTransform(func(st hubv1alpha1.FleetStatus) string {
		if c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition); c != nil {
			return c.Reason
		}
		return ""
	}, Equal(reason))
}
