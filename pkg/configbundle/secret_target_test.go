package configbundle_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// secretTimeout bounds each wait of the Secret target tests.
const secretTimeout = 20 * time.Second

// hubSources holds what the suite's Options.HubSources resolves a bundle to, by
// "member/namespace/name": the stand-in for the hub's snapshots (pkg/placement tests the real
// one).
var hubSources sync.Map

func testHubSources(_ context.Context, member multicluster.ClusterName, b *configbundlev1alpha1.ConfigBundle) (map[string][]byte, error) {
	data, ok := hubSources.Load(fmt.Sprintf("%s/%s/%s", member, b.Namespace, b.Name))
	if !ok || b.Spec.HubSource == nil {
		return nil, fmt.Errorf("no source: %w", configbundle.ErrSourceNotFound)
	}
	return data.(map[string][]byte), nil
}

// secretBundle is a bundle with target Secret in member-a whose source holds data.
func secretBundle(ns, name string, data map[string][]byte) *configbundlev1alpha1.ConfigBundle {
	hubSources.Store(fmt.Sprintf("%s/%s/%s", memberA, ns, name), data)
	return &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: secretSpec()}
}

// TestSecretTarget: a bundle with target Secret owns an Opaque Secret of its name, labelled
// SecretLabel, with its source's data; an edit of it is healed and named by its keys, never
// its values; the Secret goes with the bundle.
func TestSecretTarget(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	bundle := secretBundle(ns, "pull", map[string][]byte{"token": []byte("s3cr3t-value")})
	g.Expect(c.Create(ctx, bundle)).To(Succeed())

	secret := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), secret)).To(Succeed())
		g.Expect(secret.Data).To(Equal(map[string][]byte{"token": []byte("s3cr3t-value")}))
	}).WithTimeout(secretTimeout).Should(Succeed())
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
	g.Expect(secret.Labels).To(HaveKeyWithValue(configbundlev1alpha1.SecretLabel, "true"))
	g.Expect(metav1.GetControllerOf(secret).UID).To(Equal(bundle.UID))
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), bundle)).To(Succeed())
		g.Expect(bundle.Status.SecretRef).NotTo(BeNil())
		g.Expect(bundle.Status.ConfigMapRef).To(BeNil())
		g.Expect(meta.IsStatusConditionTrue(bundle.Status.Conditions, configbundlev1alpha1.ReadyCondition)).To(BeTrue())
	}).WithTimeout(secretTimeout).Should(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound), "no ConfigMap besides")

	// An edit is healed; the Event names the key, not the values.
	secret.Data["token"], secret.Data["extra"] = []byte("edited-value"), []byte("x")
	g.Expect(c.Update(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), secret)).To(Succeed())
		g.Expect(secret.Data).To(Equal(map[string][]byte{"token": []byte("s3cr3t-value")}))
	}).WithTimeout(secretTimeout).Should(Succeed())
	var notes []string
	g.Eventually(func(g Gomega) {
		var err error
		notes, err = events(ctx, c, bundle, configbundlev1alpha1.DriftHealedEvent)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(notes).NotTo(BeEmpty())
	}).WithTimeout(secretTimeout).Should(Succeed())
	g.Expect(notes[0]).To(ContainSubstring("healed Secret " + ns + "/pull"))
	for _, note := range notes {
		g.Expect(note).NotTo(Or(ContainSubstring("s3cr3t"), ContainSubstring("edited-value")))
	}

	// A deleted Secret is recreated.
	g.Expect(c.Delete(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fresh := &corev1.Secret{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), fresh)).To(Succeed())
		g.Expect(fresh.UID).NotTo(Equal(secret.UID))
	}).WithTimeout(secretTimeout).Should(Succeed())

	// The Secret goes with the bundle (member-a has a garbage collector).
	g.Expect(c.Delete(ctx, bundle)).To(Succeed())
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(bundle), &corev1.Secret{})
	}).WithTimeout(secretTimeout).Should(Satisfy(apierrors.IsNotFound))
}

// TestSecretTargetImmutable: an immutable bundle with target Secret makes its Secret immutable;
// a new source (a new hubSource) replaces it.
func TestSecretTargetImmutable(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	bundle := secretBundle(ns, "frozen", map[string][]byte{"k": []byte("one")})
	bundle.Spec.Immutable = true
	g.Expect(c.Create(ctx, bundle)).To(Succeed())
	first := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), first)).To(Succeed())
		g.Expect(first.Immutable).To(Equal(ptr.To(true)))
	}).WithTimeout(secretTimeout).Should(Succeed())

	// The source changes and the bundle is recreated with another hubSource, as placement
	// does: the Secret of the earlier bundle is adopted and replaced.
	g.Expect(c.Delete(ctx, bundle)).To(Succeed())
	g.Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(bundle), bundle) }).WithTimeout(secretTimeout).Should(Satisfy(apierrors.IsNotFound))
	next := secretBundle(ns, "frozen", map[string][]byte{"k": []byte("two")})
	next.Spec.Immutable, next.Spec.HubSource.Revision = true, 2
	g.Expect(c.Create(ctx, next)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(next), s)).To(Succeed())
		g.Expect(s.Data).To(Equal(map[string][]byte{"k": []byte("two")}))
		g.Expect(s.Immutable).To(Equal(ptr.To(true)))
		g.Expect(metav1.GetControllerOf(s).UID).To(Equal(next.UID))
	}).WithTimeout(secretTimeout).Should(Succeed())
}

// TestSecretTargetSourceNotFound: a bundle with target Secret whose hubSource the hub does not
// resolve is SourceNotFound and gets no Secret; a Secret of its name that another wrote is a
// SecretConflict, left untouched.
func TestSecretTargetSourceNotFound(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	bundle := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hand"}, Spec: secretSpec()}
	g.Expect(c.Create(ctx, bundle)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), bundle)).To(Succeed())
		ready := meta.FindStatusCondition(bundle.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(configbundlev1alpha1.SourceNotFoundReason))
		g.Expect(ready.Message).To(ContainSubstring("the hub writes no Secret"))
	}).WithTimeout(secretTimeout).Should(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))

	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Data: map[string][]byte{"k": []byte("theirs")}}
	g.Expect(c.Create(ctx, foreign)).To(Succeed())
	conflicting := secretBundle(ns, "taken", map[string][]byte{"k": []byte("ours")})
	g.Expect(c.Create(ctx, conflicting)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(conflicting), conflicting)).To(Succeed())
		ready := meta.FindStatusCondition(conflicting.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(configbundlev1alpha1.SecretConflictReason))
		g.Expect(ready.Message).NotTo(Or(ContainSubstring("theirs"), ContainSubstring("ours")))
		g.Expect(strings.HasPrefix(ready.Message, "Secret "+ns+"/taken already exists")).To(BeTrue(), ready.Message)
	}).WithTimeout(secretTimeout).Should(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	g.Expect(foreign.Data).To(Equal(map[string][]byte{"k": []byte("theirs")}))
}
