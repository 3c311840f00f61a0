package sharded

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestFleetBundleAcrossReplicas: a FleetBundle over members that three replicas share. Each
// member's owner places it; each replica reports its share and the elected one, which sees none
// of the others' members, sums them: twelve selected, twelve Ready, AllReady. A staged rollout:
// two canaries managed by different replicas (one at a time, soaking 3 s) get the new message
// first, while every other member keeps the old one; then the rest get it, half of them at a
// time, and the elected replica completes it from the replicas' counts. Deleted, the FleetBundle
// is removed from every member and released.
func TestFleetBundleAcrossReplicas(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	own := settledOwners(t, "r0", "r1", "r2")
	var canaries []string
	for _, id := range []string{"r0", "r1", "r2"} {
		if ms := membersOf(own, id); len(ms) > 0 && len(canaries) < 2 {
			canaries = append(canaries, ms[0])
		}
	}
	Expect(canaries).To(HaveLen(2), "members of two replicas: %v", own)
	for _, m := range canaries {
		Expect(fl.LabelMember(ctx, m, map[string]string{"test.rollout/ring": "canary"})).To(Succeed())
	}
	t.Cleanup(func() {
		for _, m := range canaries {
			_ = fl.LabelMember(ctx, m, map[string]string{"test.rollout/ring": ""})
		}
	})
	// A name of its own each run: the members run no garbage collector, so the ConfigMap of a
	// previous run's bundle stays, and would conflict.
	fl.MustBindGlobal(t, bundleNS) // FleetBundles place only into the members of the ClusterSets bound to their namespace
	fb := fleet.NewFleetBundle(bundleNS, fmt.Sprintf("staged-%d", time.Now().UnixNano()), nil, configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})
	fb.Spec.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{
		{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"test.rollout/ring": "canary"}},
			MaxConcurrency: ptr.To(intstr.FromInt32(1)), SoakTime: &metav1.Duration{Duration: 3 * time.Second}},
		{Name: "rest", ClusterSelector: &metav1.LabelSelector{}, MaxConcurrency: ptr.To(intstr.FromString("50%"))},
	}}
	Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { _ = fl.Hub.Delete(ctx, fb) })
	complete := func(revision int64) {
		Eventually(func(g Gomega) {
			g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), fb)).To(Succeed())
			g.Expect(fb.Status.Rollout).NotTo(BeNil())
			g.Expect(fb.Status.Rollout.Phase).To(Equal(hubv1alpha1.RolloutComplete), fb.Status.Rollout.Message)
			g.Expect(fb.Status.CurrentRevision).To(Equal(revision))
			g.Expect(fb.Status.ObservedGeneration).To(Equal(fb.Generation))
			g.Expect(fb.Status.Clusters).To(Equal(hubv1alpha1.PlacementCounts{Selected: memberCount, Applied: memberCount, Ready: memberCount, Updated: memberCount}))
			ready := meta.FindStatusCondition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(hubv1alpha1.AllReadyReason))
			var ids []string
			for _, s := range fb.Status.Replicas {
				ids = append(ids, s.Replica)
				g.Expect(s.Clusters.Ready).To(BeNumerically("==", len(membersOf(own, s.Replica))), "share of %s", s.Replica)
			}
			g.Expect(ids).To(ConsistOf("r0", "r1", "r2"))
		}).WithTimeout(2 * timeout).WithPolling(interval).Should(Succeed())
	}
	complete(1) // the first placement follows the stages too

	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // the replicas write its status meanwhile
		if err := fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), fb); err != nil {
			return err
		}
		fb.Spec.Template.Spec.Message = "v2"
		return fl.Hub.Update(ctx, fb)
	})).To(Succeed())
	messages := func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, m := range names {
			b := &configbundlev1alpha1.ConfigBundle{}
			g.Expect(fl.Member(m).Client.Get(ctx, client.ObjectKey{Namespace: bundleNS, Name: fb.Name}, b)).To(Succeed(), "member %s", m)
			out[m] = b.Spec.Message
		}
		return out
	}
	// While the canaries soak, they hold v2 and every other member v1.
	Eventually(func(g Gomega) {
		g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), fb)).To(Succeed())
		g.Expect(fb.Status.Rollout).NotTo(BeNil())
		g.Expect(fb.Status.Rollout.Stage).To(Equal("canary"))
		g.Expect(fb.Status.Rollout.Phase).To(Equal(hubv1alpha1.RolloutSoaking))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	Consistently(func(g Gomega) {
		for m, msg := range messages(g) {
			if slices.Contains(canaries, m) {
				continue // before the soak ends, and after it
			}
			g.Expect(msg).To(Equal("v1"), "member %s, outside the canary stage", m)
		}
	}).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	for m, msg := range messages(Default) {
		if slices.Contains(canaries, m) {
			Expect(msg).To(Equal("v2"), "canary %s", m)
		}
	}
	complete(2)
	for m, msg := range messages(Default) {
		Expect(msg).To(Equal("v2"), "member %s", m)
	}

	Expect(fl.Hub.Delete(ctx, fb)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the FleetBundle is released")
	for _, m := range names {
		Eventually(func() bool {
			return apierrors.IsNotFound(fl.Member(m).Client.Get(ctx, client.ObjectKey{Namespace: bundleNS, Name: fb.Name}, &configbundlev1alpha1.ConfigBundle{}))
		}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the placed bundle is removed from %s", m)
	}
}
