package spokeprovider_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/configbundle"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// previousCRDFile is the ConfigBundle CRD as released before spec.data (commit b26dcf4): what a
// member installed by an earlier hub still serves.
const previousCRDFile = "testdata/configbundle-crd-previous.yaml"

// TestPreviousCRDIsUpgradedOnConnect: a member that still serves the previous ConfigBundle CRD,
// without spec.data, prunes the data of a bundle. When the hub (InstallCRDs) connects, it has
// applied its own CRD by the time the member is Ready: then a bundle with data keeps its data and
// is reconciled, every key in its ConfigMap beside message, the new rules are in force (a data
// key message is refused), and a bundle made under the previous CRD is reconciled too.
func TestPreviousCRDIsUpgradedOnConnect(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	t.Cleanup(func() { restoreCRD(t, memberB) })
	installPreviousCRD(g, memberB)
	c := bundleClient(g, memberB)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-upgrade-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	data := map[string]configbundlev1alpha1.DataValue{"app.properties": "color=blue\n", "log-level": "debug"}
	newBundle := func(name string) *configbundlev1alpha1.ConfigBundle {
		return &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello " + name, Data: data}}
	}

	// The previous CRD is served: spec.data is not in its schema, and is pruned.
	g.Eventually(func(g Gomega) {
		probe := newBundle("probe")
		g.Expect(c.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.Spec.Data).To(BeEmpty())
	}).WithTimeout(crdTimeout).WithPolling(interval).Should(Succeed(), "the member serves the previous CRD")
	before := newBundle("before")
	g.Expect(c.Create(ctx, before)).To(Succeed())
	g.Expect(before.Spec.Data).To(BeEmpty(), "the previous CRD prunes spec.data")

	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	opts.ClusterOptions = []cluster.Option{func(o *cluster.Options) {
		o.Scheme = c.Scheme()
		configbundle.ConfigureCache(&o.Cache)
	}}
	f := startProviderOn(t, opts, hub.Config, withBundleReconciler)
	f.createSecret("crd-upgrade", memberB.Kubeconfig())
	f.waitReady(g, "crd-upgrade")
	g.Expect(liveCRD(g, memberB).Spec.Versions[0].Schema).To(Equal(memberCRDs[0].Spec.Versions[0].Schema),
		"the hub applied its CRD when it connected, before the member was Ready")

	// The member's API server serves the new schema moments after the CRD changed.
	g.Eventually(func(g Gomega) {
		probe := newBundle("probe")
		g.Expect(c.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.Spec.Data).To(Equal(data))
	}).WithTimeout(crdTimeout).WithPolling(interval).Should(Succeed(), "the member serves the hub's CRD")
	after := newBundle("after")
	g.Expect(c.Create(ctx, after)).To(Succeed())
	g.Expect(after.Spec.Data).To(Equal(data), "spec.data is kept")
	g.Eventually(configMapData(ctx, c, after)).WithTimeout(crdTimeout).WithPolling(interval).Should(Equal(map[string]string{
		"message": "hello after", "app.properties": "color=blue\n", "log-level": "debug",
	}), "the bundle is reconciled, every data key in its ConfigMap")
	g.Eventually(configMapData(ctx, c, before)).WithTimeout(crdTimeout).WithPolling(interval).Should(Equal(map[string]string{
		"message": "hello before",
	}), "the bundle made under the previous CRD is reconciled too")

	refused := newBundle("refused")
	refused.Spec.Data = map[string]configbundlev1alpha1.DataValue{"message": "x"}
	err := c.Create(ctx, refused)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("data must not have the key message"))
}

// withBundleReconciler sets up the ConfigBundle reconciler on a fixture's manager, as the hub
// does, so that the members' bundles are reconciled.
func withBundleReconciler(mgr mcmanager.Manager, p *spokeprovider.Provider) error {
	// The controller's kind must be known to the manager's scheme (client-go's, in the suite).
	if err := configbundlev1alpha1.AddToScheme(mgr.GetLocalManager().GetScheme()); err != nil {
		return err
	}
	_, err := configbundle.SetupWithManager(mgr, configbundle.Options{
		RetryBaseDelay: 100 * time.Millisecond,
		RetryMaxDelay:  time.Second,
		Connected:      p.Connected,
		ResyncOn:       p.OnReady,
	})
	return err
}

// installPreviousCRD puts the versions of the previous ConfigBundle CRD (previousCRDFile) in a
// member's CRD, and waits until it is established.
func installPreviousCRD(g Gomega, cp *controlplane.ControlPlane) {
	raw, err := os.ReadFile(previousCRDFile)
	g.Expect(err).NotTo(HaveOccurred())
	previous := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.UnmarshalStrict(raw, previous)).To(Succeed())
	g.Expect(previous.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties).NotTo(HaveKey("data"))
	c := crdClient(g, cp)
	ctx := context.Background()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: previous.Name}, crd); err != nil {
			return err
		}
		crd.Spec.Versions = previous.Spec.Versions
		return c.Update(ctx, crd)
	})).To(Succeed())
	g.Eventually(func(g Gomega) bool {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: previous.Name}, crd)).To(Succeed())
		_, hasData := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["data"]
		return !hasData && established(crd)
	}).WithTimeout(crdTimeout).WithPolling(interval).Should(BeTrue())
}

// bundleClient is a client of a member that knows ConfigBundles.
func bundleClient(g Gomega, cp *controlplane.ControlPlane) client.Client {
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(configbundlev1alpha1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(rest.CopyConfig(cp.Config), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// configMapData polls the data of a bundle's ConfigMap.
func configMapData(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), cm)).To(Succeed())
		return cm.Data
	}
}
