package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/kwok"
	"configbundle.dev/hub/pkg/rollout"
)

// workloadSet are members of their own whose Deployments get Pods (simulated by kwok), started
// by the first test that uses them.
var workloadSet = &auditedMembers{kind: "workloads", names: []string{"wl1", "wl2"},
	opts: controlplane.Options{GarbageCollector: true, Controllers: []string{"deployment", "replicaset", "serviceaccount"}},
	started: func(members []*fleet.Member) error {
		for _, m := range members {
			if err := kwok.Start(context.Background(), m.Plane, m.Client); err != nil {
				return err
			}
		}
		return nil
	}}

// TestRolloutRestartsItsDeployments: the hub binary, with the member role `hub register` binds,
// restarts the Deployment that reads a bundle in the canary; a bad value there rolls the rollout
// back (WorkloadUnhealthy, naming the Deployment) and restarts it on the old content; the other
// member is written nothing, its Deployment never patched (member audit logs).
func TestRolloutRestartsItsDeployments(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.workloads/selected", "rollout-workloads"
	workloadSet.join(t, "wl1", "wl2")
	for _, m := range []string{"wl1", "wl2"} {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
		g.Expect(client.IgnoreAlreadyExists(fl.Member(m).Client.Create(ctx, kwok.Deployment(ns, "app", "web", configbundlev1alpha1.MessageKey)))).To(Succeed())
	}
	selectMember(t, "wl1", ringLabel, "canary")
	selectMember(t, "wl2", ringLabel, "rest")
	fl.MustBindGlobal(t, ns)
	fb := fleet.NewFleetBundle(ns, "web", map[string]string{key: "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: "good-1"})
	fb.Spec.Rollout = canaryThenRest(0)
	fb.Spec.Rollout.OnFailure, fb.Spec.Rollout.Workloads = hubv1alpha1.OnFailureRollback, hubv1alpha1.WorkloadsRestart
	fb.Spec.Rollout.WorkloadTimeout = &metav1.Duration{Duration: 10 * time.Second}
	g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(g, fb) })
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 2))
	for _, m := range []string{"wl1", "wl2"} {
		g.Eventually(deploymentOf(m, ns)).WithTimeout(timeout).WithPolling(interval).Should(restartedFor("1"), "member %s", m)
	}

	since := time.Now()
	g.Expect(updateTemplate(g, fb, kwok.BadValue)).To(Succeed())
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutRolledBack),
		HaveField("Rollout.Message", And(ContainSubstring(hubv1alpha1.WorkloadUnhealthyReason), ContainSubstring("Deployment app")))))
	g.Eventually(deploymentOf("wl1", ns)).WithTimeout(timeout).WithPolling(interval).Should(restartedFor("1"), "restarted on the old content")
	auditBarrier(g, "wl1", "wl2")
	g.Expect(restarts(g, "wl1", ns, since)).To(Equal(2), "the canary's Deployment: restarted for revision 2, then for 1")
	g.Expect(restarts(g, "wl2", ns, since)).To(BeZero(), "the other member's Deployment is never patched")
	g.Expect(bundleWrites(g, "wl2", fb, since)).To(BeEmpty(), "the other member is written nothing")
}

// deploymentOf polls Deployment app of namespace ns in a member.
func deploymentOf(member, ns string) func(Gomega) *appsv1.Deployment {
	return func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(fl.Member(member).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, d)).To(Succeed())
		return d
	}
}

// restartedFor matches a Deployment restarted for revision, rolled out and available.
func restartedFor(revision string) OmegaMatcher {
	return And(HaveField("Spec.Template.Annotations", HaveKeyWithValue(hubv1alpha1.RestartedForAnnotation, revision)),
		WithTransform(func(d *appsv1.Deployment) string { return rollout.DeploymentConsumer(d).Problem }, BeEmpty()))
}

// restarts counts the hub's patches of Deployment app of namespace ns in a member since then.
func restarts(g Gomega, member, ns string, since time.Time) int {
	writes, err := fl.Member(member).Plane.Writes()
	g.Expect(err).NotTo(HaveOccurred())
	return len(slices.DeleteFunc(fleet.WritesSince(writes, since), func(w controlplane.Write) bool {
		return w.Resource != "deployments" || w.Subresource != "" || w.Namespace != ns || w.Name != "app" || w.Verb != "patch" ||
			!strings.Contains(w.User, "configbundle-hub")
	}))
}
