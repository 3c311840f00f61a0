package registration

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// cleanUpMember deletes what the registration has in the member, the cluster id: its
// ClusterRoleBinding, ServiceAccount and token Secrets; the legacy ServiceAccount and binding if
// no other registration may use them; and the ClusterRole if no binding refers to it any more.
// It goes on past failures and names what it left behind.
func (o *options) cleanUpMember(ctx context.Context, member client.Client, members registry, id string) error {
	var (
		left []string
		errs []error
	)
	record := func(what string, err error) {
		if err != nil {
			left = append(left, what)
			errs = append(errs, fmt.Errorf("deleting %s: %w", what, err))
		}
	}
	what := o.memberObjects()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleBindingName(o.Name)}}
	record(what[0], o.deleteOwned(ctx, member, binding))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: o.MemberNamespace, Name: ServiceAccountName(o.Name)}}
	record(what[1], o.deleteOwned(ctx, member, sa))
	_, err := o.deleteTokenSecrets(ctx, member, "")
	record(what[2], err)
	if !members.legacyInUse(id, o.Name) {
		record(fmt.Sprintf("ServiceAccount %s/%s and ClusterRoleBinding %s of older registrations", o.MemberNamespace, LegacyServiceAccountName, RBACName),
			o.deleteLegacy(ctx, member))
	}
	record(what[3], deleteRoleIfUnused(ctx, member))
	if len(errs) > 0 {
		return o.leftBehind(left, errors.Join(errs...))
	}
	return nil
}

// memberObjects names what a registration may have in the member: its ClusterRoleBinding,
// ServiceAccount and token Secrets, and the shared ClusterRole.
func (o *options) memberObjects() []string {
	return []string{
		"ClusterRoleBinding " + ClusterRoleBindingName(o.Name),
		"ServiceAccount " + o.MemberNamespace + "/" + ServiceAccountName(o.Name),
		fmt.Sprintf("token Secrets %s/%s* (annotated %s=%s; their tokens stay valid while they exist)", o.MemberNamespace, tokenSecretGenerateName(o.Name), RegistrationAnnotation, o.Name),
		"ClusterRole " + RBACName + " (unless another registration binds it)",
	}
}

// deleteOwned deletes obj, as it is now, if it is the registration's.
func (o *options) deleteOwned(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if !ownedBy(obj, o.Name) {
		return nil
	}
	return deleteExactly(ctx, c, obj)
}

// deleteExactly deletes obj if it is still the object read (same uid); gone already is fine.
func deleteExactly(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	return client.IgnoreNotFound(c.Delete(ctx, obj, client.Preconditions{UID: &uid}))
}

// deleteLegacy deletes the ClusterRoleBinding RBACName and the ServiceAccount
// LegacyServiceAccountName of registrations made before each had its own, as far as Register made
// them: the binding only if it binds nothing but that ServiceAccount, the ServiceAccount only if
// no binding grants it anything any more (such as config/member's, which shares it).
func (o *options) deleteLegacy(ctx context.Context, member client.Client) error {
	binding := &rbacv1.ClusterRoleBinding{}
	err := member.Get(ctx, client.ObjectKey{Name: RBACName}, binding)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case isLegacyBinding(binding, o.MemberNamespace):
		if err := deleteExactly(ctx, member, binding); err != nil {
			return err
		}
	}
	b, err := listBindings(ctx, member)
	if err != nil || b.grant(func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == o.MemberNamespace && s.Name == LegacyServiceAccountName
	}) {
		return err
	}
	sa := &corev1.ServiceAccount{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: o.MemberNamespace, Name: LegacyServiceAccountName}, sa); err != nil {
		return client.IgnoreNotFound(err)
	}
	if sa.Labels[hubv1alpha1.ManagedByLabel] != FieldOwner {
		return nil
	}
	return deleteExactly(ctx, member, sa)
}

// isLegacyBinding says whether b is the binding Register applied before each registration had
// its own.
func isLegacyBinding(b *rbacv1.ClusterRoleBinding, namespace string) bool {
	legacy := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: LegacyServiceAccountName}}
	return b.Labels[hubv1alpha1.ManagedByLabel] == FieldOwner && b.Annotations[RegistrationAnnotation] == "" &&
		b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == RBACName && slices.Equal(b.Subjects, legacy)
}

// deleteRoleIfUnused deletes the ClusterRole RBACName if Register made it and no ClusterRoleBinding
// or RoleBinding refers to it.
func deleteRoleIfUnused(ctx context.Context, member client.Client) error {
	b, err := listBindings(ctx, member)
	if err != nil || b.refer(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RBACName}) {
		return err
	}
	role := &rbacv1.ClusterRole{}
	if err := member.Get(ctx, client.ObjectKey{Name: RBACName}, role); err != nil {
		return client.IgnoreNotFound(err)
	}
	if role.Labels[hubv1alpha1.ManagedByLabel] != FieldOwner {
		return nil
	}
	return deleteExactly(ctx, member, role)
}

// bindings are the member's ClusterRoleBindings and RoleBindings.
type bindings struct {
	refs     []rbacv1.RoleRef
	subjects []rbacv1.Subject
}

func listBindings(ctx context.Context, member client.Client) (*bindings, error) {
	crbs := &rbacv1.ClusterRoleBindingList{}
	if err := member.List(ctx, crbs); err != nil {
		return nil, fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	rbs := &rbacv1.RoleBindingList{}
	if err := member.List(ctx, rbs); err != nil {
		return nil, fmt.Errorf("listing RoleBindings: %w", err)
	}
	b := &bindings{}
	for _, x := range crbs.Items {
		b.refs = append(b.refs, x.RoleRef)
		b.subjects = append(b.subjects, x.Subjects...)
	}
	for _, x := range rbs.Items {
		b.refs = append(b.refs, x.RoleRef)
		b.subjects = append(b.subjects, x.Subjects...)
	}
	return b, nil
}

// refer says whether a binding refers to ref.
func (b *bindings) refer(ref rbacv1.RoleRef) bool {
	return slices.Contains(b.refs, ref)
}

// grant says whether a binding has a subject for which match holds.
func (b *bindings) grant(match func(rbacv1.Subject) bool) bool {
	return slices.ContainsFunc(b.subjects, match)
}
