package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// bundleDeletes returns the hub's deletions of the bundle ns/name in member since then, from the
// member's audit log.
func bundleDeletes(g Gomega, member, ns, name string, since time.Time) []controlplane.Write {
	writes, err := fl.Member(member).Plane.Writes()
	g.Expect(err).NotTo(HaveOccurred())
	var out []controlplane.Write
	for _, w := range fleet.WritesSince(writes, since) {
		if w.Resource == "configbundles" && w.Subresource == "" && w.Namespace == ns && w.Name == name && w.Verb == "delete" &&
			strings.HasPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix) {
			out = append(out, w)
		}
	}
	return out
}

// orphanedConfigMap polls whether a member's ConfigMap ns/name is left with message and without
// the hub's ownership: no ownerReference, no label or annotation of the hub.
func orphanedConfigMap(member, ns, name, message string) func(Gomega) {
	return func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(fl.Member(member).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
		g.Expect(cm.DeletionTimestamp).To(BeNil())
		g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, message))
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		for _, m := range []map[string]string{cm.Labels, cm.Annotations} {
			for k := range m {
				g.Expect(strings.HasPrefix(k, hubv1alpha1.HubPrefix)).To(BeFalse(), "%s keeps the hub's key %s", member, k)
			}
		}
	}
}

// dropOrphans finishes, in members without a garbage collector, what it would: the orphaned
// bundles ns/names go (their orphan finalizer removed), and the test deletes the ConfigMaps it
// left, so that no later test meets them.
func dropOrphans(t *testing.T, ns string, members []string, names ...string) {
	ctx := context.Background()
	for _, m := range members {
		c := fl.Member(m).Client
		for _, name := range names {
			key := client.ObjectKey{Namespace: ns, Name: name}
			b := &configbundlev1alpha1.ConfigBundle{}
			if err := c.Get(ctx, key, b); err == nil && len(b.Finalizers) > 0 {
				b.Finalizers = nil
				if err := c.Update(ctx, b); err != nil {
					t.Logf("%s: removing the finalizers of bundle %s: %v", m, key, err)
				}
			}
			_ = client.IgnoreNotFound(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
		}
	}
}

// TestRemovalsOrphanHoldAndApprove: with deletionPolicy Orphan, deleting a FleetBundle leaves its
// ConfigMaps without the hub's ownership. Deleting the binding that would remove a staged
// FleetBundle from 3 of 3 members with maxRemovals 1 removes nothing (member audit logs) and
// reports RemovalHeld; binding it again clears it; deleting it again and `hub rollout approve
// --removals` removes it in stage order (the canary, then the rest after its soak), each
// ConfigMap orphaned.
func TestRemovalsOrphanHoldAndApprove(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns, set, soak = "e2e.removals/selected", "removals", "e2e-removals", 2 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	rolloutFixture(t, ns, key)
	t.Cleanup(func() { dropOrphans(t, ns, members, "api", "web") })
	cs := fleet.NewClusterSet(set, map[string]string{key: "yes"})
	g.Expect(fl.Hub.Create(ctx, cs)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(fl.Hub.Delete(context.Background(), cs)) })
	g.Expect(fl.Bind(ctx, nil, ns, set)).To(Succeed())
	newBundle := func(name string, rollout *hubv1alpha1.RolloutStrategy) *hubv1alpha1.FleetBundle {
		fb := fleet.NewFleetBundle(ns, name, map[string]string{key: "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})
		fb.Spec.DeletionPolicy, fb.Spec.Rollout = hubv1alpha1.DeletionPolicyOrphan, rollout
		g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
		t.Cleanup(func() { deleteFleetBundle(g, fb) })
		return fb
	}

	// Orphan on delete.
	api := newBundle("api", nil)
	everywhere(g, api, "v1", members...)
	deleteFleetBundle(g, api)
	for _, m := range members {
		g.Eventually(orphanedConfigMap(m, ns, "api", "v1")).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}

	// Held, then cleared by binding the set again.
	staged := canaryThenRest(soak)
	staged.MaxRemovals = ptr.To(intstr.FromInt32(1))
	web := newBundle("web", staged)
	g.Eventually(fleetBundleStatus(web)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 3))
	binding := fleet.NewClusterSetBinding(ns, set)
	unbound := time.Now()
	g.Expect(fl.Hub.Delete(ctx, binding)).To(Succeed())
	held := And(fleet.RolloutPhase(hubv1alpha1.RolloutRemovalHeld),
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.RemovalHeldReason))
	g.Eventually(fleetBundleStatus(web)).WithTimeout(timeout).WithPolling(interval).Should(held)
	ready := meta.FindStatusCondition(fleetBundleStatus(web)(g).Conditions, hubv1alpha1.ReadyCondition)
	g.Expect(ready.Message).To(And(ContainSubstring("3 members"), ContainSubstring("the binding "+ns+"/"+set+" was deleted")))
	g.Consistently(holding(web, members...)).WithTimeout(2 * time.Second).WithPolling(interval).Should(Equal(all(holds(1, "v1"), members...)))
	auditBarrier(g, members...)
	for _, m := range members {
		g.Expect(bundleDeletes(g, m, ns, "web", unbound)).To(BeEmpty(), "%s: nothing removed while held", m)
	}
	g.Expect(fl.Bind(ctx, nil, ns, set)).To(Succeed())
	g.Eventually(fleetBundleStatus(web)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), HaveField("Rollout.Removals", BeNil())))

	// Held again, approved: removed in stage order, each ConfigMap orphaned.
	g.Expect(fl.Hub.Delete(ctx, binding)).To(Succeed())
	g.Eventually(fleetBundleStatus(web)).WithTimeout(timeout).WithPolling(interval).Should(held)
	approved := time.Now()
	out, err := exec.Command(fl.Binary, "rollout", "approve", "web", "-n", ns, "--removals", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("hub rollout approve --removals: %s", out)
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(web), got)).To(Succeed())
	g.Expect(got.Spec.Rollout.RemovalApprovals).To(ContainElement(HaveField("ApprovedBy", Not(BeEmpty()))))
	for _, m := range members {
		g.Eventually(orphanedConfigMap(m, ns, "web", "v1")).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}
	g.Eventually(fleetBundleStatus(web)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Rollout.Removals", BeNil()))
	auditBarrier(g, members...)
	canary := bundleDeletes(g, "ro1", ns, "web", approved)
	g.Expect(canary).To(HaveLen(1), "the canary's deletes: %v", writeTimes(canary))
	for _, m := range []string{"ro2", "ro3"} {
		w := bundleDeletes(g, m, ns, "web", approved)
		g.Expect(w).To(HaveLen(1), "%s's deletes: %v", m, writeTimes(w))
		g.Expect(w[0].At).To(BeTemporally(">=", canary[0].At.Add(soak)), "%s lost the bundle %v after the canary, before its soak of %v ended", m, w[0].At.Sub(canary[0].At), soak)
	}
}
