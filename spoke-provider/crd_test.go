package spokeprovider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// crdTimeout bounds noticing a deleted CRD and bringing it back: a few probes.
const crdTimeout = 15 * time.Second

// TestFaultCRDDeletedIsReinstalled: with InstallCRDs, a ConfigBundle CRD deleted from a connected
// member is installed again at the next probe, and the member ends Ready.
func TestFaultCRDDeletedIsReinstalled(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	f.createSecret("crd-back", memberB.Kubeconfig())
	f.waitReady(g, "crd-back")
	uid := crdUID(g, memberB)
	t.Cleanup(func() { restoreCRD(t, memberB) })

	deleteCRD(g, memberB)
	deleted := time.Now()
	g.Eventually(func(g Gomega) types.UID { return crdUID(g, memberB) }).WithTimeout(crdTimeout).WithPolling(interval).
		ShouldNot(Or(BeEmpty(), Equal(uid)), "the hub installs the CRD again")
	t.Logf("CRD reinstalled %v after its deletion (probe interval %v)", time.Since(deleted).Round(time.Millisecond), probeInterval)
	g.Eventually(f.state("crd-back")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
}

// TestFaultCRDDeletedIsReported: without InstallCRDs, a CRD deleted from a connected member makes it
// not Ready (CRDMissing) at the next probe, once; restoring it makes the member Ready again.
func TestFaultCRDDeletedIsReported(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.CRDs = memberCRDs
	f := startProvider(t, opts)
	f.createSecret("crd-gone", memberB.Kubeconfig())
	f.waitReady(g, "crd-gone")
	t.Cleanup(func() { restoreCRD(t, memberB) })
	readies := len(f.history.readiesOf("crd-gone"))

	deleteCRD(g, memberB)
	deleted := time.Now()
	g.Eventually(f.state("crd-gone")).WithTimeout(crdTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.CRDMissingReason))
	t.Logf("CRDMissing reported %v after the CRD's deletion (probe interval %v)", time.Since(deleted).Round(time.Millisecond), probeInterval)
	g.Expect(f.provider.Connected(multicluster.ClusterName("crd-gone"))).To(MatchError(spokeprovider.ErrNotConnected))
	missing := 0
	for _, o := range f.history.changesOf("crd-gone") {
		if o.State.Reason == hubv1alpha1.CRDMissingReason {
			missing++
		}
	}
	g.Expect(missing).To(Equal(1), "said once")

	restoreCRD(t, memberB)
	restored := time.Now()
	g.Eventually(f.state("crd-gone")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
	t.Logf("Ready again %v after the CRD was restored", time.Since(restored).Round(time.Millisecond))
	g.Eventually(func() int { return len(f.history.readiesOf("crd-gone")) }).WithTimeout(crdTimeout).WithPolling(interval).
		Should(Equal(readies+1), "its bundles are resynced")
}

func crdClient(g Gomega, cp *controlplane.ControlPlane) client.Client {
	scheme := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(rest.CopyConfig(cp.Config), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// crdUID returns the uid of the ConfigBundle CRD in a member, or "" if there is none.
func crdUID(g Gomega, cp *controlplane.ControlPlane) types.UID {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := crdClient(g, cp).Get(context.Background(), client.ObjectKey{Name: memberCRDs[0].Name}, crd)
	if apierrors.IsNotFound(err) || !crd.DeletionTimestamp.IsZero() {
		return ""
	}
	g.Expect(err).NotTo(HaveOccurred())
	return crd.UID
}

// deleteCRD deletes the ConfigBundle CRD from a member and waits until it is gone.
func deleteCRD(g Gomega, cp *controlplane.ControlPlane) {
	c := crdClient(g, cp)
	g.Expect(c.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: memberCRDs[0].ObjectMeta})).To(Succeed())
}

// restoreCRD creates the ConfigBundle CRD in a member if it is missing, and waits until served.
func restoreCRD(t *testing.T, cp *controlplane.ControlPlane) {
	g := NewWithT(t)
	c := crdClient(g, cp)
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, interval, crdTimeout, true, func(context.Context) (bool, error) {
		crd := memberCRDs[0].DeepCopy()
		crd.ResourceVersion, crd.UID = "", ""
		err := c.Create(ctx, crd)
		switch {
		case apierrors.IsAlreadyExists(err):
			existing := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), existing); err != nil {
				return false, nil
			}
			return existing.DeletionTimestamp.IsZero() && established(existing), nil
		case errors.Is(err, context.Canceled):
			return false, err
		}
		return false, nil
	})
	g.Expect(err).NotTo(HaveOccurred(), "restoring the CRD")
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
