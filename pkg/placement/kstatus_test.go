package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestKstatusReadsFleetBundles: what kstatus (sigs.k8s.io/cli-utils, the health check of Flux,
// kpt and Argo CD-style tools) reads of real FleetBundles, one per Ready reason. kstatus knows
// no FleetBundle: past the generation check it reads the Ready condition, True as Current and
// False as InProgress. So a FleetBundle that selects nothing is Ready=True NoClustersSelected
// (vacuously ready, as a Deployment scaled to 0) and reads Current, not InProgress forever; a
// failure (ClustersFailed) reads InProgress, which a health check waits out until its timeout.
func TestKstatusReadsFleetBundles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		want   kstatus.Status
		// setUp selects members (or not) for FleetBundle ns/web and returns its selector.
		setUp func(t *testing.T) (ns string, selector *metav1.LabelSelector)
	}{
		{name: "none selected", reason: hubv1alpha1.NoClustersSelectedReason, want: kstatus.CurrentStatus,
			setUp: func(t *testing.T) (string, *metav1.LabelSelector) {
				return newNamespace(t), selecting("test.kstatus/nobody")
			}},
		{name: "all ready", reason: hubv1alpha1.AllReadyReason, want: kstatus.CurrentStatus,
			setUp: func(t *testing.T) (string, *metav1.LabelSelector) {
				labelMember(t, memberA, "test.kstatus/ready", "yes")
				return newNamespace(t, memberA), selecting("test.kstatus/ready")
			}},
		{name: "progressing", reason: hubv1alpha1.ProgressingReason, want: kstatus.InProgressStatus,
			setUp: func(t *testing.T) (string, *metav1.LabelSelector) {
				// The ConfigMap an earlier bundle of the name left, its deletion held by a
				// finalizer: the placed bundle waits for it to go, not Ready yet.
				ns := newNamespace(t, memberB)
				holdGarbage(t, memberB, ns, "web")
				labelMember(t, memberB, "test.kstatus/progressing", "yes")
				return ns, selecting("test.kstatus/progressing")
			}},
		{name: "failed", reason: hubv1alpha1.ClustersFailedReason, want: kstatus.InProgressStatus,
			setUp: func(t *testing.T) (string, *metav1.LabelSelector) {
				labelMember(t, memberC, "test.kstatus/failed", "yes") // without the namespace: NamespaceMissing
				return newNamespace(t), selecting("test.kstatus/failed")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ctx := NewWithT(t), context.Background()
			ns, selector := tc.setUp(t)
			fb := newFleetBundle(t, ns, selector, "kstatus")
			g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
				fleet.FleetBundleReady(tc.reason), HaveField("ObservedGeneration", BeEquivalentTo(1))))
			g.Consistently(status(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(fleet.FleetBundleReady(tc.reason), "settled")
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(hubv1alpha1.GroupVersion.WithKind("FleetBundle"))
			g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(fb), u)).To(Succeed())
			res, err := kstatus.Compute(u)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("%s: kstatus %s (%s)", tc.reason, res.Status, res.Message)
			g.Expect(res.Status).To(Equal(tc.want))
		})
	}
}

// holdGarbage makes, in a member, the ConfigMap ns/name of an earlier ConfigBundle of that name
// (its controller, with a uid that no longer exists) being deleted, held by a finalizer of the
// test's until the test ends.
func holdGarbage(t *testing.T, member, ns, name string) {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), memberClients[member]
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"test.configbundle.dev/hold"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle", Name: name,
			UID: "00000000-0000-0000-0000-000000000000", Controller: ptr.To(true)}}}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	g.Expect(c.Delete(ctx, cm)).To(Succeed())
	t.Cleanup(func() {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		_ = client.IgnoreNotFound(c.Patch(context.Background(), cm, patch))
	})
}
