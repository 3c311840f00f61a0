package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestPausedMemberAwayKeepsItsRevision: with revisionHistoryLimit 0, ro2 paused, its API server
// stopped (SIGSTOP) and the hub restarted meanwhile, two template changes reach ro1 and prune no
// revision ro2 holds: the FleetBundle's status.heldRevisions, read by the new hub, keeps it.
// Once ro2 answers again, its placed bundle and ConfigMap edited by hand are restored to that
// revision: the hub's update of the bundle is in ro2's audit log.
func TestPausedMemberAwayKeepsItsRevision(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.revisions/held", "revisions-held"
	members := []string{"ro1", "ro2"}
	rolloutMembers(t, members...)
	for _, m := range members {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	fb := newRolloutBundle(t, ns, key, "v1", nil, ptr.To[int32](0))
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("HeldRevisions", Equal([]int64{1})))

	pauseMember(t, "ro2")
	g.Expect(fl.Member("ro2").Plane.Pause()).To(Succeed())
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = fl.Member("ro2").Plane.Resume()
		}
	})
	g.Eventually(fl.MemberCluster("ro2")).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.UnreachableReason))
	fl.StopHub(fleet.HubName, syscall.SIGTERM)
	t.Cleanup(func() {
		if fl.HubProcess(fleet.HubName) == nil {
			g.Expect(startHub()).To(Succeed())
		}
	})
	g.Expect(startHub()).To(Succeed())

	for i, msg := range []string{"v2", "v3"} {
		g.Expect(updateTemplate(g, fb, msg)).To(Succeed())
		g.Eventually(holding(fb, "ro1")).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(int64(i+2), msg), "ro1")))
	}
	g.Eventually(revisionNumbers(fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal([]int64{1, 3}),
		"revision 2 pruned; revision 1 kept: ro2, away, holds it")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("HeldRevisions", Equal([]int64{1, 3})), HaveField("ObservedRevision", BeEquivalentTo(3))))

	g.Expect(fl.Member("ro2").Plane.Resume()).To(Succeed())
	stopped = false
	g.Eventually(fl.MemberCluster("ro2")).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Expect(holding(fb, "ro2")(g)).To(Equal(all(holds(1, "v1"), "ro2")))

	since := time.Now()
	ro2 := fl.Member("ro2").Client
	g.Expect(fleet.Tamper(ctx, ro2, client.ObjectKeyFromObject(fb), "tampered")).To(Succeed())
	editPlacedBundle(ctx, g, ro2, client.ObjectKeyFromObject(fb))
	g.Eventually(holding(fb, "ro2")).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), "ro2")),
		"the placed bundle and the ConfigMap restored to the revision ro2 holds")
	g.Consistently(holding(fb, "ro2")).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(all(holds(1, "v1"), "ro2")))
	auditBarrier(g, "ro2")
	g.Expect(bundleWrites(g, "ro2", fb, since)).To(ConsistOf(HaveField("Verb", "update")), "one write of the hub to ro2's bundle: the heal")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Heals", BeNumerically(">=", 1))))
}

// revisionNumbers polls the numbers of a FleetBundle's ControllerRevisions.
func revisionNumbers(fb *hubv1alpha1.FleetBundle) func(Gomega) []int64 {
	return func(g Gomega) []int64 {
		revs, err := fleet.Revisions(context.Background(), fl.Hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		out := []int64{}
		for _, r := range revs {
			out = append(out, r.Revision)
		}
		return out
	}
}
