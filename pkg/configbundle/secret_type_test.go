package configbundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// pullSecretData is the data of a registry pull Secret (kubectl create secret docker-registry).
var pullSecretData = map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"dXNlcjpzM2NyM3Q="}}}`)}

// readyOf waits until the bundle's Ready condition has reason, and returns it.
func readyOf(g Gomega, c client.Client, bundle *configbundlev1alpha1.ConfigBundle, reason string) *metav1.Condition {
	var ready *metav1.Condition
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(bundle), bundle)).To(Succeed())
		ready = meta.FindStatusCondition(bundle.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(reason), ready.Message)
		g.Expect(ready.ObservedGeneration).To(Equal(bundle.Generation))
	}).WithTimeout(secretTimeout).WithPolling(interval).Should(Succeed())
	return ready
}

// TestSecretType: a bundle with target Secret publishes a Secret of its spec.secretType, Opaque
// when it sets none, with its source's data.
func TestSecretType(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, memberA)
	tests := []struct {
		name       string
		secretType configbundlev1alpha1.SecretType
		data       map[string][]byte
		want       corev1.SecretType
	}{
		{name: "none", data: map[string][]byte{"token": []byte("t")}, want: corev1.SecretTypeOpaque},
		{name: "dockerconfigjson", secretType: configbundlev1alpha1.SecretTypeDockerConfigJSON, data: pullSecretData, want: corev1.SecretTypeDockerConfigJson},
		{name: "tls", secretType: configbundlev1alpha1.SecretTypeTLS,
			data: map[string][]byte{corev1.TLSCertKey: []byte("crt"), corev1.TLSPrivateKeyKey: []byte("key")}, want: corev1.SecretTypeTLS},
		{name: "basic-auth", secretType: configbundlev1alpha1.SecretTypeBasicAuth,
			data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("user")}, want: corev1.SecretTypeBasicAuth},
		{name: "ssh-auth", secretType: configbundlev1alpha1.SecretTypeSSHAuth,
			data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("key")}, want: corev1.SecretTypeSSHAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, ctx, c := NewWithT(t), context.Background(), members[memberA]
			bundle := secretBundle(ns, tt.name, tt.data)
			bundle.Spec.SecretType = tt.secretType
			g.Expect(c.Create(ctx, bundle)).To(Succeed())
			readyOf(g, c, bundle, configbundlev1alpha1.SyncedReason)
			secret := &corev1.Secret{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), secret)).To(Succeed())
			g.Expect(secret.Type).To(Equal(tt.want))
			g.Expect(secret.Data).To(Equal(tt.data))
			g.Expect(secret.Annotations).To(BeEmpty())
		})
	}
}

// TestSecretTypeChange: a Secret's type cannot change, so a new spec.secretType replaces the
// Secret, and no heal is counted. A type whose required key the data lacks is refused by the
// member's API server: the bundle is InvalidSecret, naming the key but no value, and the Secret
// it had stays as it was until the spec changes.
func TestSecretTypeChange(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	bundle := secretBundle(ns, "pull", pullSecretData)
	g.Expect(c.Create(ctx, bundle)).To(Succeed())
	readyOf(g, c, bundle, configbundlev1alpha1.SyncedReason)
	opaque := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), opaque)).To(Succeed())
	g.Expect(opaque.Type).To(Equal(corev1.SecretTypeOpaque))

	// A type the data does not fit: refused, terminal, and the Opaque Secret is kept.
	g.Expect(update(ctx, c, bundle, func(b *configbundlev1alpha1.ConfigBundle) {
		b.Spec.SecretType = configbundlev1alpha1.SecretTypeTLS
	})).To(Succeed())
	ready := readyOf(g, c, bundle, configbundlev1alpha1.InvalidSecretReason)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(And(ContainSubstring("Secret "+ns+"/pull of type kubernetes.io/tls"), ContainSubstring(corev1.TLSCertKey)))
	g.Expect(ready.Message).NotTo(Or(ContainSubstring("auths"), ContainSubstring("dXNlcjpzM2NyM3Q")))
	kept := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(opaque.UID))
	g.Expect(kept.Type).To(Equal(corev1.SecretTypeOpaque))

	// The registry type: the Secret is replaced by one of that type.
	g.Expect(update(ctx, c, bundle, func(b *configbundlev1alpha1.ConfigBundle) {
		b.Spec.SecretType = configbundlev1alpha1.SecretTypeDockerConfigJSON
	})).To(Succeed())
	readyOf(g, c, bundle, configbundlev1alpha1.SyncedReason)
	replaced := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), replaced)).To(Succeed())
	g.Expect(replaced.UID).NotTo(Equal(opaque.UID))
	g.Expect(replaced.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
	g.Expect(replaced.Data).To(Equal(pullSecretData))
	g.Expect(metav1.GetControllerOf(replaced).UID).To(Equal(bundle.UID))
	g.Expect(bundle.Status.SecretRef.UID).To(Equal(replaced.UID))
	g.Expect(events(ctx, c, bundle, configbundlev1alpha1.DriftHealedEvent)).To(BeEmpty(), "a new type is no heal")
}

// TestSecretTypeMissingKey: a bundle whose source lacks the key its spec.secretType requires gets
// no Secret: the member's API server refuses it, and the bundle is InvalidSecret.
func TestSecretTypeMissingKey(t *testing.T) {
	t.Parallel()
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	bundle := secretBundle(ns, "pull", map[string][]byte{"token": []byte("s3cr3t-value")})
	bundle.Spec.SecretType = configbundlev1alpha1.SecretTypeDockerConfigJSON
	g.Expect(c.Create(ctx, bundle)).To(Succeed())
	ready := readyOf(g, c, bundle, configbundlev1alpha1.InvalidSecretReason)
	g.Expect(ready.Message).To(And(HavePrefix("creating Secret "+ns+"/pull"), ContainSubstring(corev1.DockerConfigJsonKey)))
	g.Expect(ready.Message).NotTo(ContainSubstring("s3cr3t-value"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))
}
