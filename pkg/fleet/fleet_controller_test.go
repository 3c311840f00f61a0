package fleet_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
