package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// joined registers the members once and waits for them.
func joined(t *testing.T, names ...string) {
	t.Helper()
	g := NewWithT(t)
	for _, name := range names {
		mc := &hubv1alpha1.MemberCluster{}
		if fl.Hub.Get(context.Background(), client.ObjectKey{Name: name}, mc) != nil {
			fl.MustRegister(t, name)
		}
	}
	for _, name := range names {
		g.Eventually(fl.MemberCluster(name)).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	}
}

func ensureNamespace(g Gomega, member, ns string) {
	g.Expect(fleet.EnsureNamespace(context.Background(), fl.Member(member).Client, ns)).To(Succeed())
}

// createBundle creates a bundle in a member and waits until its ConfigMap is there.
func createBundle(g Gomega, member, ns, name, message string) *configbundlev1alpha1.ConfigBundle {
	ensureNamespace(g, member, ns)
	b := fleet.NewBundle(ns, name, message)
	g.Expect(fl.Member(member).Client.Create(context.Background(), b)).To(Succeed())
	g.Eventually(fl.Member(member).Message(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal(message))
	return b
}

// tamper changes a managed ConfigMap's message.
func tamper(g Gomega, member string, b *configbundlev1alpha1.ConfigBundle) {
	g.Expect(fleet.Tamper(context.Background(), fl.Member(member).Client, client.ObjectKeyFromObject(b), "tampered")).To(Succeed())
}

func TestJoinReconcileAndReport(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m1", "m2", "m3")

	for _, name := range []string{"m1", "m2", "m3"} {
		mc := fl.MemberCluster(name)(g)
		g.Expect(mc.Spec.SecretRef).To(Equal(hubv1alpha1.SecretReference{Namespace: secretNS, Name: name}))
		g.Expect(mc.Status.KubernetesVersion).To(HavePrefix("v1.36"))
		g.Expect(mc.Status.ClusterID).NotTo(BeEmpty())
		g.Expect(mc.Status.LastSeenTime).NotTo(BeNil())
	}

	// The hub installed the ConfigBundle CRD in members that lacked it; bundles reconcile in
	// each member on their own.
	a1 := createBundle(g, "m1", "join", "a", "one")
	createBundle(g, "m1", "join", "b", "two")
	createBundle(g, "m2", "join", "a", "three")
	ensureNamespace(g, "m3", "join")
	g.Expect(fl.Member("m3").Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "join"}})).To(Succeed())
	g.Expect(fl.Member("m3").Client.Create(ctx, &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "join"}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "x"}})).To(Succeed())

	counts := func(name string) func(Gomega) hubv1alpha1.BundleCounts {
		return func(g Gomega) hubv1alpha1.BundleCounts { return fl.MemberCluster(name)(g).Status.Bundles }
	}
	g.Eventually(counts("m1")).WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.BundleCounts{Total: 2, Ready: 2}))
	g.Eventually(counts("m2")).WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.BundleCounts{Total: 1, Ready: 1}))
	g.Eventually(counts("m3")).WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.BundleCounts{Total: 1, Failed: 1}))
	// Every member counts, those that earlier tests joined (the quiet member) too; their bundles
	// are gone with those tests.
	g.Eventually(func(g Gomega) {
		list := &hubv1alpha1.MemberClusterList{}
		g.Expect(fl.Hub.List(ctx, list)).To(Succeed())
		members := int64(len(list.Items))
		f := fl.Fleet(g)
		g.Expect(f).To(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.BundlesFailedReason))
		f.Status.Conditions, f.Status.HeartbeatTime = nil, nil
		g.Expect(f.Status).To(Equal(hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: members, Ready: members},
			Bundles: hubv1alpha1.BundleCounts{Total: 4, Ready: 3, Failed: 1}, HeartbeatIntervalSeconds: int64(heartbeatInterval / time.Second)}))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	// The conflict resolves; a heal in m1 is counted on its MemberCluster and on the Fleet.
	g.Expect(fl.Member("m3").Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: "join"}})).To(Succeed())
	tamper(g, "m1", a1)
	g.Eventually(fl.Member("m1").Message(a1)).WithTimeout(timeout).WithPolling(interval).Should(Equal("one"))
	g.Eventually(func(g Gomega) int64 { return fl.MemberCluster("m1")(g).Status.Heals }).WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(1))
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		WithTransform(func(f *hubv1alpha1.Fleet) int64 { return f.Status.Heals }, BeEquivalentTo(1)),
		WithTransform(func(f *hubv1alpha1.Fleet) hubv1alpha1.BundleCounts { return f.Status.Bundles }, Equal(hubv1alpha1.BundleCounts{Total: 4, Ready: 4})),
	))

	// What an operator alerts on is on the metrics endpoint, per member.
	g.Eventually(fl.Metrics).WithTimeout(timeout).WithPolling(interval).Should(And(
		ContainSubstring(`configbundle_hub_members{ready="true",reason="Connected"}`),
		ContainSubstring(`configbundle_reconciles_total{cluster="m1",result="success"}`),
		ContainSubstring(`configbundle_heals_total{cluster="m1"} 1`),
		ContainSubstring(`configbundle_heal_latency_seconds_count{cluster="m1"} 1`),
		ContainSubstring(`configbundle_member_ready{cluster="m1"} 1`),
		ContainSubstring(`configbundle_member_bundles{cluster="m1"} 2`),
		ContainSubstring(`configbundle_member_failed_bundles{cluster="m1"} 0`),
		ContainSubstring(`configbundle_member_probe_duration_seconds_count{cluster="m1"}`),
		ContainSubstring(`configbundle_member_last_probe_success_timestamp_seconds{cluster="m1"}`),
		ContainSubstring(`configbundle_build_info{`),
		// The work queue, fair across members, counts per member and as controller-runtime's.
		ContainSubstring(`configbundle_member_queue_wait_seconds_count{cluster="m1"}`),
		ContainSubstring(`configbundle_member_queue_depth{cluster="m1"}`),
		ContainSubstring(`workqueue_adds_total{controller="configbundle",name="configbundle"}`),
		// Workers are set on the controller itself: v0.24.1 ignores the manager's options.
		ContainSubstring(`controller_runtime_max_concurrent_reconciles{controller="configbundle"} 8`),
	))
}

func TestFaultPausedMemberIsUnreachableAndRecovers(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m1", "m2")
	b1 := createBundle(g, "m1", "paused", "web", "m1 keeps working")
	createBundle(g, "m2", "paused", "web", "m2 pauses")
	all := &configbundlev1alpha1.ConfigBundleList{}
	g.Expect(fl.Member("m2").Client.List(context.Background(), all)).To(Succeed())
	n := int64(len(all.Items))
	before := hubv1alpha1.BundleCounts{Total: n, Ready: n}
	g.Eventually(func(g Gomega) hubv1alpha1.BundleCounts { return fl.MemberCluster("m2")(g).Status.Bundles }).
		WithTimeout(timeout).WithPolling(interval).Should(Equal(before))

	g.Expect(fl.Member("m2").Plane.Pause()).To(Succeed())
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = fl.Member("m2").Plane.Resume()
		}
	}()
	g.Eventually(fl.MemberCluster("m2")).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.UnreachableReason))
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.MembersNotReadyReason))
	t.Logf("SIGSTOP -> MemberCluster Unreachable and Fleet not Ready: %v (probe interval %v)", time.Since(paused).Round(time.Millisecond), probeInterval)
	mc := fl.MemberCluster("m2")(g)
	g.Expect(mc.Status.Bundles).To(Equal(before), "an unreachable member keeps its last counts")
	g.Expect(mc.Status.LastSeenTime).NotTo(BeNil())

	// The others keep working.
	tamper(g, "m1", b1)
	g.Eventually(fl.Member("m1").Message(b1)).WithTimeout(timeout).WithPolling(interval).Should(Equal("m1 keeps working"))

	g.Expect(fl.Member("m2").Plane.Resume()).To(Succeed())
	resumed, resumedAt := true, time.Now()
	g.Eventually(fl.MemberCluster("m2")).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).ShouldNot(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.MembersNotReadyReason))
	t.Logf("SIGCONT -> MemberCluster Connected and Fleet no longer MembersNotReady: %v", time.Since(resumedAt).Round(time.Millisecond))
}

func TestFaultHubKilledHealsDriftMadeWhileDown(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m1", "m2")
	b1 := createBundle(g, "m1", "restart", "web", "survive")
	b2 := createBundle(g, "m2", "restart", "web", "come back")

	fl.StopHub(fleet.HubName, syscall.SIGKILL)
	tamper(g, "m1", b1)
	g.Expect(fl.Member("m2").Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "restart"}})).To(Succeed())
	// A MemberCluster whose Secret went away while the hub was down.
	g.Expect(fl.Hub.Create(ctx, &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "ghost"},
		Spec: hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: secretNS, Name: "ghost"}}})).To(Succeed())
	g.Consistently(fl.Member("m1").Message(b1)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("tampered"), "nothing heals while the hub is down")

	restarted := time.Now()
	g.Expect(startHub()).To(Succeed())
	g.Eventually(fl.Member("m1").Message(b1)).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal("survive"))
	g.Eventually(fl.Member("m2").Message(b2)).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal("come back"))
	t.Logf("hub restarted -> drift made while it was down healed in both members: %v", time.Since(restarted).Round(time.Millisecond))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(ctx, client.ObjectKey{Name: "ghost"}, &hubv1alpha1.MemberCluster{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the hub removes stale MemberClusters after a restart")
}
