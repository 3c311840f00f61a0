package restarttest

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/kwok"
	"configbundle.dev/hub/pkg/rollout"
)

// workloadTimeout is the rollouts' spec.rollout.workloadTimeout: how long a restarted
// Deployment may take to be available.
const workloadTimeout = 10 * time.Second

// TestRestartHaltsAndRollsBackOnItsDeployment: with workloads Restart, a bad value makes the
// canary's Deployment unavailable (its Pod refuses the value), the rollout rolls back naming
// the Deployment (WorkloadUnhealthy), the other member keeps the old revision and its
// Deployment is never restarted, and the canary's Deployment is restarted on the old content
// and is available again; then a good value completes, each Deployment restarted exactly once.
func TestRestartHaltsAndRollsBackOnItsDeployment(t *testing.T) {
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
			OnFailure: hubv1alpha1.OnFailureRollback, Workloads: hubv1alpha1.WorkloadsRestart,
			WorkloadTimeout: &metav1.Duration{Duration: workloadTimeout},
		},
	}}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { _ = hub.Delete(ctx, fb) })

	// Revision 1: each Deployment restarted for it, once, and available.
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 2))
	generations := map[string]int64{}
	for _, m := range []string{canary, rest} {
		g.Eventually(app(m, ns)).WithTimeout(timeout).WithPolling(interval).Should(restartedAndAvailable("1"))
		generations[m] = app(m, ns)(g).Generation
	}

	// Revision 2 is bad: the canary's Deployment never becomes available; the rollout rolls back.
	setMessage(g, fb, kwok.BadValue)
	g.Eventually(app(canary, ns)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Spec.Template.Annotations",
		HaveKeyWithValue(hubv1alpha1.RestartedForAnnotation, "2")), "the canary's Deployment is restarted for revision 2")
	g.Eventually(crashLooping(canary, ns)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the canary's new Pod refuses the value")
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Rollout.Workloads", ContainElement(And(
		HaveField("Cluster", canary), HaveField("Consumers", ContainElement(And(HaveField("Kind", "Deployment"), HaveField("Name", "app"),
			HaveField("State", hubv1alpha1.ConsumerProgressing))))))), "the status says the canary waits for its Deployment")
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutRolledBack),
		HaveField("Rollout.Message", And(ContainSubstring(hubv1alpha1.WorkloadUnhealthyReason), ContainSubstring("Deployment app")))))
	g.Eventually(app(canary, ns)).WithTimeout(timeout).WithPolling(interval).Should(restartedAndAvailable("1"),
		"the canary's Deployment is restarted on the old content, and available")
	g.Expect(app(canary, ns)(g).Generation).To(Equal(generations[canary]+2), "restarted for revision 2, then for revision 1: once each")
	g.Expect(revisionHeld(g, rest, fb)).To(Equal("1"), "the other member never got revision 2")
	g.Expect(app(rest, ns)(g).Generation).To(Equal(generations[rest]), "the other member's Deployment was never restarted")
	generations[canary] += 2

	// Revision 3 is good: it completes stage by stage, each Deployment restarted once.
	setMessage(g, fb, "good-3")
	g.Eventually(fleet.FleetBundleStatus(hub, fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(3, 2))
	for _, m := range []string{canary, rest} {
		g.Eventually(app(m, ns)).WithTimeout(timeout).WithPolling(interval).Should(restartedAndAvailable("3"))
		g.Expect(app(m, ns)(g).Generation).To(Equal(generations[m]+1), "member %s: restarted once for revision 3", m)
	}
}

// deployment is Deployment app of namespace ns, whose container reads the message of the
// bundle web's ConfigMap from its environment.
func deployment(ns string) *appsv1.Deployment {
	return kwok.Deployment(ns, "app", "web", configbundlev1alpha1.MessageKey)
}

// app polls Deployment app of namespace ns in a member.
func app(member, ns string) func(Gomega) *appsv1.Deployment {
	return func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(memberClients[member].Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, d)).To(Succeed())
		return d
	}
}

// crashLooping polls whether a Pod of Deployment app of namespace ns in a member waits in
// CrashLoopBackOff.
func crashLooping(member, ns string) func(Gomega) bool {
	return func(g Gomega) bool {
		pods := &corev1.PodList{}
		g.Expect(memberClients[member].List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "app"})).To(Succeed())
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff" {
					return true
				}
			}
		}
		return false
	}
}

// restartedAndAvailable matches a Deployment restarted for revision, rolled out and available.
func restartedAndAvailable(revision string) OmegaMatcher {
	return And(HaveField("Spec.Template.Annotations", HaveKeyWithValue(hubv1alpha1.RestartedForAnnotation, revision)),
		WithTransform(func(d *appsv1.Deployment) string { return rollout.DeploymentConsumer(d).Problem }, BeEmpty()))
}

// revisionHeld is the revision of the bundle a member holds.
func revisionHeld(g Gomega, member string, fb *hubv1alpha1.FleetBundle) string {
	b := &configbundlev1alpha1.ConfigBundle{}
	g.Expect(memberClients[member].Get(context.Background(), client.ObjectKeyFromObject(fb), b)).To(Succeed())
	return b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation]
}

// setMessage changes the message of a FleetBundle's template.
func setMessage(g Gomega, fb *hubv1alpha1.FleetBundle, message string) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &hubv1alpha1.FleetBundle{}
		if err := hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got); err != nil {
			return err
		}
		got.Spec.Template.Spec.Message = message
		return hub.Update(context.Background(), got)
	})).To(Succeed())
}

// newNamespace creates a namespace of its own for a test in the hub and the members, and binds
// fleet.GlobalClusterSet into it.
func newNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(t.Name())[:20] + "-"}}
	if err := hub.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	for _, m := range []string{canary, rest} {
		if err := memberClients[m].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}); err != nil {
			t.Fatalf("creating namespace %s in %s: %v", ns.Name, m, err)
		}
	}
	if err := hub.Create(ctx, fleet.NewClusterSetBinding(ns.Name, fleet.GlobalClusterSet)); err != nil {
		t.Fatalf("binding ClusterSet: %v", err)
	}
	return ns.Name
}

// labelCanary labels the canary's MemberCluster ring=canary.
func labelCanary(t *testing.T) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &hubv1alpha1.MemberCluster{}
		if err := hub.Get(context.Background(), client.ObjectKey{Name: canary}, mc); err != nil {
			return err
		}
		mc.Labels = map[string]string{"ring": "canary"}
		return hub.Update(context.Background(), mc)
	})
	if err != nil {
		t.Fatalf("labelling %s: %v", canary, err)
	}
}
