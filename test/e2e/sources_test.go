package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// putHubSource writes hub ConfigMap ns/name, labelled as a FleetBundle source, with ca.crt.
func putHubSource(g Gomega, ns, name, ca string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_, err := controllerutil.CreateOrUpdate(context.Background(), fl.Hub, cm, func() error {
		cm.Labels = map[string]string{hubv1alpha1.SourceLabel: "true"}
		cm.Data = map[string]string{"ca.crt": ca}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
}

// caHeld returns, for each member, the ca.crt of the FleetBundle's ConfigMap there and the
// revision its bundle holds: "PEM-1@1".
func caHeld(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, m := range members {
			cm := &corev1.ConfigMap{}
			err := fl.Member(m).Client.Get(context.Background(), client.ObjectKeyFromObject(fb), cm)
			if !apierrors.IsNotFound(err) {
				g.Expect(err).NotTo(HaveOccurred())
			}
			rev := ""
			if b := placed(m, fb)(g); b != nil {
				rev = b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation]
			}
			out[m] = cm.Data["ca.crt"] + "@" + rev
		}
		return out
	}
}

// everyCA is what caHeld returns when every member holds ca at revision rev.
func everyCA(ca string, rev int64, members ...string) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		out[m] = ca + "@" + strconv.FormatInt(rev, 10)
	}
	return out
}

// TestDataFromSourceRollsOutAndUndoes: a labelled hub ConfigMap placed into three members by
// dataFrom; a change of it is a new revision that reaches the canary first and halts there, the
// canary refusing it, while the rest keep the old content; `hub rollout undo` then restores the
// old content everywhere although the source still holds the new one.
func TestDataFromSourceRollsOutAndUndoes(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns, soak = "e2e.sources/ca", "sources-ca", 2 * time.Second
	members := []string{"ro1", "ro2", "ro3"}
	rolloutFixture(t, ns, key)
	fl.MustBindGlobal(t, ns)
	putHubSource(g, ns, "corp-ca", "PEM-1")
	t.Cleanup(func() {
		_ = fl.Hub.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corp-ca"}})
	})
	fb := fleet.NewFleetBundle(ns, "web", map[string]string{key: "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: "ca"})
	fb.Spec.DataFrom = []hubv1alpha1.DataFromSource{{ConfigMapRef: &hubv1alpha1.SourceReference{Name: "corp-ca"}, Keys: []string{"ca.crt"}}}
	fb.Spec.Rollout = canaryThenRest(soak)
	g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(g, fb) })
	g.Eventually(caHeld(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyCA("PEM-1", 1, members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(1, 3))

	policy := fleet.MessagePolicy{Name: "refuse-" + ns, Namespace: ns, Key: "ca.crt", Message: "PEM-BAD"}
	g.Expect(policy.Install(ctx, fl.Member("ro1").Client, timeout)).To(Succeed())
	t.Cleanup(func() { _ = policy.Remove(context.Background(), fl.Member("ro1").Client, timeout) })
	putHubSource(g, ns, "corp-ca", "PEM-BAD")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutHalted), fleet.RolloutRevisions(1, 2), HaveField("FailedClusters", ConsistOf(HaveField("Cluster", "ro1")))))
	g.Expect(placed("ro1", fb)(g).Annotations).To(HaveKeyWithValue(hubv1alpha1.FleetBundleRevisionAnnotation, "2"), "the canary got revision 2 first")
	g.Consistently(caHeld(fb, "ro2", "ro3")).WithTimeout(soak).WithPolling(interval).Should(Equal(everyCA("PEM-1", 1, "ro2", "ro3")), "halted: the rest keep revision 1")

	code, _, _ := hubCommand(t, "rollout", "undo", "web", "-n", ns, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(0))
	g.Eventually(caHeld(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyCA("PEM-1", 1, members...)))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutRevisions(1, 1), fleet.FleetBundleReady(hubv1alpha1.AllReadyReason)))
	src := &corev1.ConfigMap{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "corp-ca"}, src)).To(Succeed())
	g.Expect(src.Data).To(HaveKeyWithValue("ca.crt", "PEM-BAD"), "the source is unchanged: the revision's copy was placed")
}
