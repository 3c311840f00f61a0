package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/template"
)

// A FleetBundle with target Secret against real members: a labelled hub Secret's data placed as
// a Secret in each selected member, through a snapshot per revision that only the hub holds, and
// a hubSource that the hub matches before it writes anything.

// putSecretSource creates (or updates) the labelled hub Secret ns/pull with data.
func putSecretSource(t *testing.T, ns string, data map[string]string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}}
	err := hub.Get(ctx, client.ObjectKeyFromObject(s), s)
	if !apierrors.IsNotFound(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	s.Labels, s.Data, s.StringData = map[string]string{hubv1alpha1.SourceLabel: "true"}, nil, data
	if s.ResourceVersion == "" {
		g.Expect(hub.Create(ctx, s)).To(Succeed())
		return
	}
	g.Expect(hub.Update(ctx, s)).To(Succeed())
}

// memberSecret polls the token of a FleetBundle's Secret in a member, "" where there is none.
func memberSecret(member string, key client.ObjectKey) func(Gomega) string {
	return func(g Gomega) string {
		s := &corev1.Secret{}
		err := memberClients[member].Get(context.Background(), key, s)
		if apierrors.IsNotFound(err) {
			return ""
		}
		g.Expect(err).NotTo(HaveOccurred())
		return string(s.Data["token"])
	}
}

// TestSecretSourcePlacedThroughSnapshots: the Secret reaches the selected member only; each
// revision keeps the values in an immutable snapshot Secret owned by its ControllerRevision,
// which holds their hash only; a source change is a new revision; an undo places revision 1's
// snapshot after the source changed.
func TestSecretSourcePlacedThroughSnapshots(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.sources/secret"
	ns := newNamespace(t, memberA, memberB)
	labelMember(t, memberA, key, "yes")
	putSecretSource(t, ns, map[string]string{"token": "marker-one"})
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key),
		DataFrom:        []hubv1alpha1.DataFromSource{{SecretRef: &hubv1alpha1.SourceReference{Name: "pull"}}},
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret}},
	}}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
	fbKey := client.ObjectKeyFromObject(fb)

	g.Eventually(memberSecret(memberA, fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal("marker-one"))
	b := placed(memberA, fb)(g)
	g.Expect(b.Spec.HubSource).To(Equal(&configbundlev1alpha1.HubSource{Namespace: ns, Name: "web", Revision: 1,
		Hash: template.SecretHash(map[string]string{"token": "marker-one"})}))
	g.Expect(memberSecret(memberB, fbKey)(g)).To(BeEmpty(), "not selected")

	snapshot := &corev1.Secret{}
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1-sources"}, snapshot)).To(Succeed())
	g.Expect(snapshot.Immutable).To(Equal(ptr.To(true)))
	g.Expect(snapshot.Labels).To(HaveKeyWithValue(hubv1alpha1.SourceLabel, hubv1alpha1.SourceSnapshotValue))
	g.Expect(metav1.GetControllerOf(snapshot)).To(HaveField("Name", "web-1"))
	cr := &appsv1.ControllerRevision{}
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-1"}, cr)).To(Succeed())
	g.Expect(string(cr.Data.Raw)).NotTo(ContainSubstring("marker-one"), "the revision holds the hash only")

	// A source change is revision 2; an undo to revision 1 places its snapshot again.
	putSecretSource(t, ns, map[string]string{"token": "marker-two"})
	g.Eventually(memberSecret(memberA, fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal("marker-two"))
	g.Expect(placed(memberA, fb)(g).Spec.HubSource.Revision).To(BeEquivalentTo(2))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.DataFromRevision = &hubv1alpha1.DataFromRevision{Revision: 1, SourcesHash: template.SecretHash(map[string]string{"token": "marker-two"})}
	})
	g.Eventually(memberSecret(memberA, fbKey)).WithTimeout(timeout).WithPolling(interval).Should(Equal("marker-one"))
}

// TestHubSourceMatchedBeforeAnyWrite: a bundle with target Secret written by hand, copying a
// placed bundle's hubSource and labels, gets SourceNotFound and no Secret: in a
// member the FleetBundle does not select, and in another namespace.
func TestHubSourceMatchedBeforeAnyWrite(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.sources/forged"
	ns := newNamespace(t, memberA, memberB)
	other := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	putSecretSource(t, ns, map[string]string{"token": "marker-forged"})
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key),
		DataFrom:        []hubv1alpha1.DataFromSource{{SecretRef: &hubv1alpha1.SourceReference{Name: "pull"}}},
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret}},
	}}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
	g.Eventually(memberSecret(memberA, client.ObjectKeyFromObject(fb))).WithTimeout(timeout).WithPolling(interval).Should(Equal("marker-forged"))
	real := placed(memberA, fb)(g)

	// Without the hub's uid annotation, so that placement leaves them alone as not its own.
	for _, forged := range []struct{ member, ns string }{{memberB, ns}, {memberA, other}} {
		b := &configbundlev1alpha1.ConfigBundle{
			ObjectMeta: metav1.ObjectMeta{Namespace: forged.ns, Name: "web", Labels: real.Labels},
			Spec:       real.Spec,
		}
		c := memberClients[forged.member]
		g.Expect(c.Create(ctx, b)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			ready := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(configbundlev1alpha1.SourceNotFoundReason), ready.Message)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), forged.member+" "+forged.ns)
		g.Expect(memberSecret(forged.member, client.ObjectKeyFromObject(b))(g)).To(BeEmpty(), "no Secret in "+forged.member+" "+forged.ns)
	}
}

// TestSecretTypePlaced: the template's secretType reaches the placed ConfigBundle, and so the
// member's Secret: a registry pull Secret of type kubernetes.io/dockerconfigjson.
func TestSecretTypePlaced(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.sources/secret-type"
	ns := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	auths := `{"auths":{"registry.example":{"auth":"cm9ib3Q6dG9rZW4="}}}`
	putSecretSource(t, ns, map[string]string{corev1.DockerConfigJsonKey: auths})
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key),
		DataFrom:        []hubv1alpha1.DataFromSource{{SecretRef: &hubv1alpha1.SourceReference{Name: "pull"}}},
		Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret,
			SecretType: configbundlev1alpha1.SecretTypeDockerConfigJSON}},
	}}
	g.Expect(hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })

	g.Eventually(func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(memberClients[memberA].Get(ctx, client.ObjectKeyFromObject(fb), s)).To(Succeed())
		g.Expect(s.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
		g.Expect(string(s.Data[corev1.DockerConfigJsonKey])).To(Equal(auths))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(placed(memberA, fb)(g).Spec.SecretType).To(Equal(configbundlev1alpha1.SecretTypeDockerConfigJSON))
}
