package sharded

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestStagedRolloutAcrossReplicas: a staged rollout over members that three replicas share. Two
// canaries managed by different replicas (one at a time, soaking 3 s) get the new message first,
// while every other member keeps the old one; then the rest get it, half of them at a time, and
// the elected replica, which sees none of the others' members, completes it from the replicas'
// counts.
func TestStagedRolloutAcrossReplicas(t *testing.T) {
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
	// A name of its own each run: the members run no garbage collector (see
	// TestFleetBundleStatusSumsTheReplicasShares).
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
			g.Expect(fb.Status.Clusters.Updated).To(BeNumerically("==", memberCount))
			g.Expect(fb.Status.Clusters.Ready).To(BeNumerically("==", memberCount))
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
}
