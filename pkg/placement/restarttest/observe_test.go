package restarttest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/kwok"
)

// TestObserveHaltsWhenItsDeploymentBreaksDuringTheSoak: with workloads Observe, nothing is
// restarted, so a bad value passes while the canary's Pods run on the old one; once a Pod
// restarts during the canary's soak and refuses the value, the rollout halts naming the
// Deployment (WorkloadUnhealthy), and the other member keeps the old revision.
func TestObserveHaltsWhenItsDeploymentBreaksDuringTheSoak(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	labelCanary(t)
	for _, m := range []string{canary, rest} {
		g.Expect(memberClients[m].Create(ctx, deployment(ns))).To(Succeed())
	}
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: &metav1.LabelSelector{},
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "good-1"}},
		Rollout: &hubv1alpha1.RolloutStrategy{
			Stages:    []hubv1alpha1.RolloutStage{{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}},
			Workloads: hubv1alpha1.WorkloadsObserve, WorkloadTimeout: &metav1.Duration{Duration: workloadTimeout},
		},
	}}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { _ = hub.Delete(ctx, fb) })
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 2))
	generation := app(canary, ns)(g).Generation

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error { // a bad value, and a soak to see it through
		got := &hubv1alpha1.FleetBundle{}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(fb), got); err != nil {
			return err
		}
		got.Spec.Template.Spec.Message, got.Spec.Rollout.Stages[0].SoakTime = kwok.BadValue, &metav1.Duration{Duration: time.Minute}
		return hub.Update(ctx, got)
	})).To(Succeed())
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutSoaking), HaveField("Rollout.Stage", "canary")), "the canary's Pod still runs on the old value")
	pods := &corev1.PodList{}
	g.Expect(memberClients[canary].List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "app"})).To(Succeed())
	for i := range pods.Items {
		g.Expect(memberClients[canary].Delete(ctx, &pods.Items[i])).To(Succeed()) // it restarts, on the bad value
	}
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutHalted),
		HaveField("Rollout.Message", And(ContainSubstring(hubv1alpha1.WorkloadUnhealthyReason), ContainSubstring("Deployment app")))))
	g.Eventually(haltedEvents(ns)).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(
		ContainSubstring("unavailable during the soak: Deployment app")), "the halt says the Deployment broke during the soak")
	g.Expect(app(canary, ns)(g).Generation).To(Equal(generation), "Observe restarts nothing")
	g.Expect(revisionHeld(g, rest, fb)).To(Equal("1"), "the other member never got revision 2")
}

// haltedEvents polls the notes of the RolloutHalted Events of namespace ns.
func haltedEvents(ns string) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(hub.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Reason == hubv1alpha1.RolloutHaltedEvent {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
}
