package tenancy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestInUseNamesTheFleetBundles: a ClusterSet and its binding name, in status.inUse, the
// FleetBundles that place through them: those of the binding's namespace whose spec.clusterSets
// is absent or names the set; following FleetBundles created, narrowed and deleted.
func TestInUseNamesTheFleetBundles(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	g.Expect(hub.Create(ctx, ns)).To(Succeed())
	set := createClusterSet(t, "inuse", metav1.LabelSelector{})
	binding := fleet.NewClusterSetBinding(ns.Name, set.Name)
	g.Expect(hub.Create(ctx, binding)).To(Succeed())
	inUse := func(g Gomega) [2][]string {
		b, s := &hubv1alpha1.ClusterSetBinding{}, &hubv1alpha1.ClusterSet{}
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(binding), b)).To(Succeed())
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(set), s)).To(Succeed())
		return [2][]string{b.Status.InUse, s.Status.InUse}
	}

	web := fleet.NewFleetBundle(ns.Name, "web", nil, configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})
	api := fleet.NewFleetBundle(ns.Name, "api", nil, configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})
	g.Expect(hub.Create(ctx, web)).To(Succeed())
	g.Expect(hub.Create(ctx, api)).To(Succeed())
	g.Eventually(inUse).WithTimeout(timeout).WithPolling(interval).Should(Equal([2][]string{
		{"api", "web"}, {ns.Name + "/api", ns.Name + "/web"}}))

	api.Spec.ClusterSets = []string{"another"}
	g.Expect(hub.Update(ctx, api)).To(Succeed())
	g.Eventually(inUse).WithTimeout(timeout).WithPolling(interval).Should(Equal([2][]string{{"web"}, {ns.Name + "/web"}}))

	g.Expect(hub.Delete(ctx, web)).To(Succeed())
	g.Eventually(inUse).WithTimeout(timeout).WithPolling(interval).Should(Equal([2][]string{nil, nil}))
}
