package registration

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/pkg/kubeconfig"
)

// cleanupTimeout bounds the deletion of a token Secret that Register created but does not use,
// after the operation's own context may have ended.
const cleanupTimeout = 10 * time.Second

// registrationAnnotations mark an object in the member as the registration Name's.
func (o *options) registrationAnnotations() map[string]string {
	return map[string]string{RegistrationAnnotation: o.Name}
}

// ownedBy says whether Register created obj for the registration name.
func ownedBy(obj client.Object, name string) bool {
	return obj.GetLabels()[hubv1alpha1.ManagedByLabel] == FieldOwner && obj.GetAnnotations()[RegistrationAnnotation] == name
}

// applyIdentity applies the registration's identity in the member: its ServiceAccount, the shared
// ClusterRole (its rules restored if someone changed them) and the registration's
// ClusterRoleBinding.
func (o *options) applyIdentity(ctx context.Context, member client.Client) error {
	role, err := config.MemberClusterRole()
	if err != nil {
		return err
	}
	saName := ServiceAccountName(o.Name)
	sa := corev1ac.ServiceAccount(saName, o.MemberNamespace).WithLabels(managedBy()).WithAnnotations(o.registrationAnnotations())
	if err := applyInNamespace(ctx, member, o.MemberNamespace, sa); err != nil {
		return fmt.Errorf("applying ServiceAccount %s/%s in the member (%s): %w", o.MemberNamespace, saName, o.memberURL, err)
	}
	if err := apply(ctx, member, clusterRole(role.Rules)); err != nil {
		return fmt.Errorf("applying ClusterRole %s in the member: %w", RBACName, err)
	}
	binding := rbacv1ac.ClusterRoleBinding(ClusterRoleBindingName(o.Name)).
		WithLabels(managedBy()).WithAnnotations(o.registrationAnnotations()).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(RBACName)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(o.MemberNamespace).WithName(saName))
	if err := apply(ctx, member, binding); err != nil {
		return fmt.Errorf("applying ClusterRoleBinding %s in the member: %w", ClusterRoleBindingName(o.Name), err)
	}
	return o.applyRenewalRole(ctx, member, saName)
}

// applyRenewalRole applies the Role and RoleBinding RenewalRoleName(Name) in MemberNamespace that
// let the registration's ServiceAccount request tokens for itself, and for no other
// ServiceAccount: the hub renews its credential with it (Renewer).
func (o *options) applyRenewalRole(ctx context.Context, member client.Client, saName string) error {
	name := RenewalRoleName(o.Name)
	role := rbacv1ac.Role(name, o.MemberNamespace).WithLabels(managedBy()).WithAnnotations(o.registrationAnnotations()).
		WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("serviceaccounts/token").WithResourceNames(saName).WithVerbs("create"))
	if err := apply(ctx, member, role); err != nil {
		return fmt.Errorf("applying Role %s/%s in the member: %w", o.MemberNamespace, name, err)
	}
	binding := rbacv1ac.RoleBinding(name, o.MemberNamespace).WithLabels(managedBy()).WithAnnotations(o.registrationAnnotations()).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(o.MemberNamespace).WithName(saName))
	if err := apply(ctx, member, binding); err != nil {
		return fmt.Errorf("applying RoleBinding %s/%s in the member: %w", o.MemberNamespace, name, err)
	}
	return nil
}

func clusterRole(rules []rbacv1.PolicyRule) *rbacv1ac.ClusterRoleApplyConfiguration {
	cr := rbacv1ac.ClusterRole(RBACName).WithLabels(managedBy())
	for _, r := range rules {
		cr.WithRules(rbacv1ac.PolicyRule().
			WithAPIGroups(r.APIGroups...).
			WithResources(r.Resources...).
			WithResourceNames(r.ResourceNames...).
			WithVerbs(r.Verbs...).
			WithNonResourceURLs(r.NonResourceURLs...))
	}
	return cr
}

// credential is a verified credential for the hub and the member Secret its token is bound to.
type credential struct {
	tokenSecret *corev1.Secret
	kubeconfig  []byte
	expires     time.Time
}

// issueCredential creates a token Secret for the registration, requests a token bound to it, and
// renders and verifies a kubeconfig with it. On failure the token Secret is deleted again.
func (o *options) issueCredential(ctx context.Context, member client.Client) (*credential, error) {
	ts := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: tokenSecretGenerateName(o.Name), Namespace: o.MemberNamespace,
			Labels: managedBy(), Annotations: o.registrationAnnotations(),
		},
		Type: corev1.SecretTypeOpaque,
	}
	if err := member.Create(ctx, ts, client.FieldOwner(FieldOwner)); err != nil {
		return nil, fmt.Errorf("creating a token Secret in %s in the member: %w", o.MemberNamespace, err)
	}
	cred, err := o.credentialFor(ctx, member, ts)
	if err != nil {
		o.deleteTokenSecret(member, ts)
		return nil, err
	}
	return cred, nil
}

// credentialFor requests a token bound to the token Secret ts and turns it into a verified
// kubeconfig.
func (o *options) credentialFor(ctx context.Context, member client.Client, ts *corev1.Secret) (*credential, error) {
	saName := ServiceAccountName(o.Name)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(o.TokenDuration / time.Second)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: ts.Name, UID: ts.UID},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: saName, Namespace: o.MemberNamespace}}
	if err := member.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s in the member: %w", o.MemberNamespace, saName, err)
	}
	if tr.Status.Token == "" {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s in the member: the API server returned no token", o.MemberNamespace, saName)
	}
	kc, err := buildKubeconfig(o.Name, o.Server, o.Member, tr.Status.Token)
	if err != nil {
		return nil, err
	}
	// Proof that the hub will accept it and that it works, before the hub is touched.
	if _, err := kubeconfig.RESTConfig(kc); err != nil {
		return nil, fmt.Errorf("the kubeconfig written for the hub would be refused by it: %w", err)
	}
	if err := verify(ctx, kc, o.Member, o.memberURL); err != nil {
		return nil, err
	}
	return &credential{tokenSecret: ts, kubeconfig: kc, expires: tr.Status.ExpirationTimestamp.UTC()}, nil
}

// deleteTokenSecret deletes a token Secret whose token is written nowhere, even after ctx ended.
// A failure leaves a Secret without data whose token nobody holds: harmless, and deleted by
// the next Register or Unregister of the registration.
func (o *options) deleteTokenSecret(member client.Client, ts *corev1.Secret) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = member.Delete(ctx, ts, client.Preconditions{UID: &ts.UID})
}

// deleteTokenSecrets deletes the registration's token Secrets but keep, revoking their tokens,
// and returns how many it deleted.
func (o *options) deleteTokenSecrets(ctx context.Context, member client.Client, keep string) (int, error) {
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := member.List(ctx, secrets, client.InNamespace(o.MemberNamespace), client.MatchingLabels(managedBy())); err != nil {
		return 0, fmt.Errorf("listing the token Secrets in %s: %w", o.MemberNamespace, err)
	}
	deleted := 0
	var errs []error
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if s.Name == keep || !ownedBy(s, o.Name) {
			continue
		}
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret")) // list items carry none
		if err := member.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting token Secret %s/%s: %w", o.MemberNamespace, s.Name, err))
			continue
		}
		deleted++
	}
	return deleted, errors.Join(errs...)
}

// revokePrevious revokes the credentials the registration no longer uses: its other token
// Secrets, and the legacy ServiceAccount if no other registration may use it.
func (o *options) revokePrevious(ctx context.Context, member client.Client, keep string, members registry, id string) (int, error) {
	n, err := o.deleteTokenSecrets(ctx, member, keep)
	if err != nil || members.legacyInUse(id, o.Name) {
		return n, err
	}
	return n, o.deleteLegacy(ctx, member)
}
