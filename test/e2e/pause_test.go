package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// hubPauseMember runs `hub pause NAME` or `hub resume NAME` (verb) against the hub, as an
// operator does, and expects exit 0 and kubectl's way of saying it.
func hubPauseMember(t *testing.T, verb, name string) {
	t.Helper()
	code, stdout, stderr := hubCommand(t, verb, name, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g := NewWithT(t)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(ContainSubstring("membercluster." + hubv1alpha1.GroupVersion.Group + "/" + name))
}

// pauseMember pauses the member name with `hub pause`, checks what says so (spec.paused, the
// Paused condition, Ready untouched, a Paused Event), and resumes it when the test ends if it still is paused
// (before the test's FleetBundles are deleted: cleanups run last first).
func pauseMember(t *testing.T, name string) {
	t.Helper()
	g := NewWithT(t)
	hubPauseMember(t, "pause", name)
	t.Cleanup(func() {
		if fl.MemberCluster(name)(g).Spec.Paused {
			hubPauseMember(t, "resume", name)
		}
	})
	g.Expect(fl.MemberCluster(name)(g).Spec.Paused).To(BeTrue(), "hub pause sets spec.paused")
	g.Eventually(fl.MemberCluster(name)).WithTimeout(timeout).WithPolling(interval).Should(And(
		pausedIs(metav1.ConditionTrue, hubv1alpha1.PausedReason),
		fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason)), "%s paused, and still Ready", name)
	g.Eventually(memberEvents(g, name, hubv1alpha1.PausedReason)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		And(HaveField("Type", "Normal"), HaveField("Reason", hubv1alpha1.PausedReason))), "one Paused Event on %s", name)
}

// pausedIs matches a MemberCluster whose Paused condition has the status and reason.
func pausedIs(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(mc *hubv1alpha1.MemberCluster) string {
		c := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.PausedCondition)
		if c == nil {
			return "no Paused condition"
		}
		return fmt.Sprintf("%s/%s", c.Status, c.Reason)
	}, Equal(fmt.Sprintf("%s/%s", status, reason)))
}

// memberEvents returns a function reading the Events of reason on the MemberCluster name as it is
// now (its uid: a member that left and joined again is another object).
func memberEvents(g Gomega, name, reason string) func(Gomega) []eventsv1.Event {
	uid := fl.MemberCluster(name)(g).UID
	return func(g Gomega) []eventsv1.Event {
		return slices.DeleteFunc(memberClusterEvents(name, reason)(g), func(e eventsv1.Event) bool { return e.Regarding.UID != uid })
	}
}

// pausedColumn reads the PAUSED column of the member name in `kubectl get memberclusters`.
func pausedColumn(g Gomega, name string) any {
	mcs := table(g, "/apis/hub.configbundle.dev/v1alpha1/memberclusters")
	col := slices.Index(columnNames(mcs), "Paused")
	g.Expect(col).NotTo(BeNumerically("<", 0), "a PAUSED column")
	for _, row := range mcs.Rows {
		if row.Cells[0] == name {
			return row.Cells[col]
		}
	}
	g.Expect(name).To(BeEmpty(), "no row of MemberCluster %s", name)
	return nil
}

// TestPausedMemberIsFrozenAtWhatItHolds: `hub pause ro2` sets spec.paused (PAUSED
// column), the Paused condition (True, Paused) and a Paused Event, leaves Ready alone, and the
// Fleet counts it. While it is paused a template change and a new FleetBundle reach ro1 and not
// ro2 (its audit log holds no write of the hub to their bundles), the FleetBundles count it
// apart (status.clusters.paused) and never failed; drift of what it holds is still healed, its
// ConfigMap by its reconciler, its placed bundle by the hub. With ro1 paused too, the
// FleetBundle is AllReady, saying every member is paused. `hub resume ro2` brings it up to
// date (Resumed Event, Paused False NotPaused). Pausing is idempotent; an unknown member is exit
// 1, a missing or extra NAME exit 2.
func TestPausedMemberIsFrozenAtWhatItHolds(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.pause/frozen", "pause-frozen"
	members := []string{"ro1", "ro2"}
	rolloutMembers(t, members...)
	for _, m := range members {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, "web", key, configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})
	everywhere(g, fb, "v1", members...)
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	g.Eventually(fl.MemberCluster("ro2")).WithTimeout(timeout).WithPolling(interval).Should(pausedIs(metav1.ConditionFalse, hubv1alpha1.NotPausedReason),
		"a member starts unpaused")
	g.Expect(memberEvents(g, "ro2", hubv1alpha1.PausedReason)(g)).To(BeEmpty())
	g.Expect(memberEvents(g, "ro2", hubv1alpha1.ResumedReason)(g)).To(BeEmpty(), "no Resumed Event for a member that joins unpaused")

	pauseMember(t, "ro2")
	g.Expect(pausedColumn(g, "ro2")).To(BeTrue())
	g.Expect(pausedColumn(g, "ro1")).To(BeFalse())
	g.Eventually(func(g Gomega) int64 { return fl.Fleet(g).Status.Clusters.Paused }).WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(1))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("FailedClusters", BeEmpty()),
		HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1})))
	hubPauseMember(t, "pause", "ro2") // again: no error, nothing changes
	g.Expect(fl.MemberCluster("ro2")(g)).To(pausedIs(metav1.ConditionTrue, hubv1alpha1.PausedReason))

	// A template change and a new FleetBundle: ro1 gets them, ro2 nothing.
	since := time.Now()
	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	api := newFleetBundle(t, ns, "api", key, configbundlev1alpha1.ConfigBundleSpec{Message: "api"})
	everywhere(g, fb, "v2", "ro1")
	everywhere(g, api, "api", "ro1")
	g.Consistently(holding(fb, "ro2")).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(all(holds(1, "v1"), "ro2")))
	g.Expect(placed("ro2", api)(g)).To(BeNil())
	noBundleWrites(g, fb, since, "ro2")
	noBundleWrites(g, api, since, "ro2")
	for _, f := range []*hubv1alpha1.FleetBundle{fb, api} {
		g.Eventually(fleetBundleStatus(f)).WithTimeout(timeout).WithPolling(interval).Should(And(
			fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("FailedClusters", BeEmpty()),
			HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Paused: 1, Applied: 1, Ready: 1, Updated: 1})), f.Name)
	}
	// hub status names ro2 and the revision of web it holds back; --fail-on-paused fails on it.
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("HeldRevisions", Equal([]int64{1, 2})))
	code, stdout, _ := hubCommand(t, "status", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--fleet-bundle", ns+"/web")
	g.Expect(code).To(Equal(0), stdout)
	g.Expect(stdout).To(ContainSubstring("FleetBundle " + ns + "/web held back: paused ro2; revision 1 held older than current revision 2"))
	code, _, stderr := hubCommand(t, "status", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--fleet-bundle", ns+"/web", "--fail-on-paused")
	g.Expect(code).To(Equal(1))
	g.Expect(stderr).To(ContainSubstring("--fail-on-paused: paused: ro2"))

	// What ro2 holds stays true: its ConfigMap tampered with is healed (by its reconciler), its
	// placed bundle changed by hand is restored (by the hub) to what it held, not to v2.
	g.Expect(fleet.Tamper(ctx, fl.Member("ro2").Client, client.ObjectKeyFromObject(fb), "tampered")).To(Succeed())
	g.Eventually(placedMessage("ro2", fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"))
	ro2 := fl.Member("ro2").Client
	editPlacedBundle(ctx, g, ro2, client.ObjectKeyFromObject(fb)) // kubectl edit configbundle web
	g.Eventually(holding(fb, "ro2")).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(1, "v1"), "ro2")))
	g.Consistently(holding(fb, "ro2")).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(all(holds(1, "v1"), "ro2")))
	g.Expect(placed("ro2", api)(g)).To(BeNil())

	// Every selected member paused: nothing to wait for, AllReady, saying so.
	pauseMember(t, "ro1")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		HaveField("Conditions", ContainElement(And(HaveField("Type", hubv1alpha1.ReadyCondition), HaveField("Message", ContainSubstring("paused"))))),
		HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Paused: 2})))
	g.Eventually(func(g Gomega) int64 { return fl.Fleet(g).Status.Clusters.Paused }).WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(2))
	hubPauseMember(t, "resume", "ro1")

	// Resumed: up to date.
	hubPauseMember(t, "resume", "ro2")
	g.Expect(fl.MemberCluster("ro2")(g).Spec.Paused).To(BeFalse())
	g.Eventually(fl.MemberCluster("ro2")).WithTimeout(timeout).WithPolling(interval).Should(pausedIs(metav1.ConditionFalse, hubv1alpha1.NotPausedReason))
	g.Eventually(memberEvents(g, "ro2", hubv1alpha1.ResumedReason)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		And(HaveField("Type", "Normal"), HaveField("Reason", hubv1alpha1.ResumedReason))))
	everywhere(g, fb, "v2", members...)
	everywhere(g, api, "api", members...)
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Status.Clusters.Paused", BeZero()))
	for _, f := range []*hubv1alpha1.FleetBundle{fb, api} {
		g.Eventually(fleetBundleStatus(f)).WithTimeout(timeout).WithPolling(interval).Should(And(
			fleet.FleetBundleReady(hubv1alpha1.AllReadyReason),
			HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})), f.Name)
	}

	// Usage: an unknown member is exit 1, a missing or extra NAME exit 2; nothing is written.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"pause", "no-such-member"}, 1},
		{[]string{"resume", "no-such-member"}, 1},
		{[]string{"pause"}, 2},
		{[]string{"resume"}, 2},
		{[]string{"pause", "ro1", "ro2"}, 2},
	} {
		code, stdout, _ := hubCommand(t, append(tc.args, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)...)
		g.Expect(code).To(Equal(tc.code), "hub %v", tc.args)
		g.Expect(stdout).To(BeEmpty(), "hub %v", tc.args)
	}
	g.Expect(fl.MemberCluster("ro1")(g).Spec.Paused).To(BeFalse())
}

// editPlacedBundle edits member's placed bundle key by hand (kubectl edit) and waits until the
// hub restored it (a newer generation) and the member's own reconciler saw that generation,
// which may have written the edit to the ConfigMap in between: then it is settled.
func editPlacedBundle(ctx context.Context, g Gomega, member client.Client, key client.ObjectKey) {
	var edited int64 // the generation of the hand edit
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &configbundlev1alpha1.ConfigBundle{}
		if err := member.Get(ctx, key, b); err != nil {
			return err
		}
		b.Spec.Message = "tampered"
		err := member.Update(ctx, b)
		edited = b.Generation
		return err
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		b := &configbundlev1alpha1.ConfigBundle{}
		g.Expect(member.Get(ctx, key, b)).To(Succeed())
		g.Expect(b.Generation).To(BeNumerically(">", edited))
		g.Expect(b.Status.ObservedGeneration).To(Equal(b.Generation))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}
