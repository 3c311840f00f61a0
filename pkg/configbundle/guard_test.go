package configbundle_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// installGuard creates the hub's admission policies in a member, for the hub's identity there
// (the suite's hub uses the member's admin credential), and deletes them when the test ends.
func installGuard(t *testing.T, member string) {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), members[member]
	cs, err := kubernetes.NewForConfig(planes[member].Config)
	g.Expect(err).NotTo(HaveOccurred())
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	policies, bindings := spokeprovider.GuardPolicies(who.Status.UserInfo.Username)
	var objs []client.Object
	for _, p := range policies {
		objs = append(objs, p)
	}
	for _, b := range bindings {
		objs = append(objs, b)
	}
	for _, obj := range objs {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
	}
	t.Cleanup(func() {
		for _, obj := range objs {
			if err := c.Delete(context.Background(), obj); err != nil {
				t.Errorf("deleting %s: %v", obj.GetName(), err)
			}
		}
	})
}

// TestGuardedConfigMapGoesWithItsBundle: with the hub's guard in a member (member-a, whose
// kube-controller-manager runs as system:kube-controller-manager, as a kubeadm cluster's), a
// ConfigMap the hub labels configbundle.dev/guard is refused to another user, yet deleting its
// bundle still has the garbage collector delete it.
func TestGuardedConfigMapGoesWithItsBundle(t *testing.T) {
	installGuard(t, memberA)
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	b, cm := synced(g, c, ns, "guarded", "v1")
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) {
		b.Labels = map[string]string{configbundlev1alpha1.GuardLabel: "true"} // the hub labels its ConfigMap alike
	})).To(Succeed())
	g.Eventually(get(ctx, c, cm)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Labels", HaveKeyWithValue(configbundlev1alpha1.GuardLabel, "true")))

	g.Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update", "delete"}},
	}})).To(Succeed())
	g.Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "editor"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "editor"}},
	})).To(Succeed())
	cfg := rest.CopyConfig(planes[memberA].Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "editor"}
	editor, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { // until the member's API server enforces the policy: a dry run goes through admission
		return editor.Delete(ctx, cm.DeepCopy(), client.DryRunAll)
	}).WithTimeout(timeout).WithPolling(interval).Should(MatchError(ContainSubstring("ConfigBundle guarded")))

	since := time.Now()
	deleteBundle(g, c, b)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the garbage collector deletes the guarded ConfigMap")
	var collector []string
	for _, w := range writesSince(t, memberA, ns, since) {
		if w.Resource == "configmaps" && w.Verb == "delete" {
			collector = append(collector, w.User)
		}
	}
	g.Expect(collector).To(ConsistOf("system:kube-controller-manager"))
}

// TestGuardedSecret: with the hub's guard in a member, the Secret of a bundle with target Secret
// and driftPolicy Guard is refused to another user who may edit Secrets, by the member's API
// server, with the message a guarded ConfigMap gets, which quotes no value; the hub still
// writes it. A Secret labelled configbundle.dev/guard that the hub did not publish is not the
// guard's.
func TestGuardedSecret(t *testing.T) {
	installGuard(t, memberA)
	g, ctx, c := NewWithT(t), context.Background(), members[memberA]
	ns := newNamespace(t, memberA)
	bundle := secretBundle(ns, "pull", map[string][]byte{"token": []byte("guarded-s3cr3t")})
	bundle.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyGuard
	g.Expect(c.Create(ctx, bundle)).To(Succeed())
	secret := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), secret)).To(Succeed())
		g.Expect(secret.Labels).To(HaveKeyWithValue(configbundlev1alpha1.GuardLabel, "true"))
		g.Expect(secret.Labels).To(HaveKeyWithValue(configbundlev1alpha1.SecretLabel, "true"))
	}).WithTimeout(secretTimeout).WithPolling(interval).Should(Succeed())

	g.Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update", "delete"}},
	}})).To(Succeed())
	g.Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "editor"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "editor"}},
	})).To(Succeed())
	cfg := rest.CopyConfig(planes[memberA].Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "editor"}
	editor, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	refusal := ContainSubstring("Secret " + ns + "/pull is guarded by ConfigBundle pull (driftPolicy Guard): change the ConfigBundle pull instead")
	g.Eventually(func() error { // until the member's API server enforces the policy: a dry run goes through admission
		return editor.Delete(ctx, secret.DeepCopy(), client.DryRunAll)
	}).WithTimeout(timeout).WithPolling(interval).Should(MatchError(refusal))
	edited := secret.DeepCopy()
	edited.Data["token"] = []byte("edited-value")
	err = editor.Update(ctx, edited)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(refusal))
	g.Expect(err.Error()).NotTo(Or(ContainSubstring("guarded-s3cr3t"), ContainSubstring("edited-value")))
	unlabel := secret.DeepCopy()
	delete(unlabel.Labels, configbundlev1alpha1.GuardLabel)
	g.Expect(editor.Update(ctx, unlabel)).To(Satisfy(apierrors.IsForbidden), "removing the label is an update like any other")

	// The hub's own identity writes it: a new source is published.
	hubSources.Store(memberA+"/"+ns+"/pull", map[string][]byte{"token": []byte("rotated")})
	g.Expect(update(ctx, c, bundle, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.HubSource.Revision = 2 })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bundle), secret)).To(Succeed())
		g.Expect(secret.Data).To(Equal(map[string][]byte{"token": []byte("rotated")}))
	}).WithTimeout(secretTimeout).WithPolling(interval).Should(Succeed())

	// A Secret the hub did not publish is the user's, whatever its labels.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs",
		Labels: map[string]string{configbundlev1alpha1.GuardLabel: "true"}}, Data: map[string][]byte{"k": []byte("v")}}
	g.Expect(c.Create(ctx, foreign)).To(Succeed())
	foreign.Data["k"] = []byte("w")
	g.Expect(editor.Update(ctx, foreign)).To(Succeed())
	g.Expect(editor.Delete(ctx, foreign)).To(Succeed())
}
