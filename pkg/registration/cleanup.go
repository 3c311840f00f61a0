package registration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// cleanUpMember deletes what the registration has in the member, the cluster id: with
// RemovePlaced first the bundles the hub placed there (once the hub has let go of the member);
// then its ClusterRoleBinding, ServiceAccount and token Secrets; the legacy ServiceAccount and
// binding if no other registration may use them; and the ClusterRole if no binding refers to it
// any more. It goes on past failures and names what it left behind.
func (o *options) cleanUpMember(ctx context.Context, c *clients, members registry, id string, res *Unregistration) error {
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
	member := c.member
	if o.RemovePlaced {
		var err error
		if res.DeletedMemberCluster, err = o.awaitRelease(ctx, c.hub); err == nil {
			res.RemovedPlaced, err = removePlaced(ctx, member)
		}
		record(placedObjects, err)
	}
	what := o.identityObjects()
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
	renewal := metav1.ObjectMeta{Namespace: o.MemberNamespace, Name: RenewalRoleName(o.Name)}
	record(what[4], errors.Join(o.deleteOwned(ctx, member, &rbacv1.RoleBinding{ObjectMeta: renewal}), o.deleteOwned(ctx, member, &rbacv1.Role{ObjectMeta: renewal})))
	if len(errs) > 0 {
		return o.leftBehind(left, errors.Join(errs...))
	}
	return nil
}

// placedObjects names the bundles the hub placed in a member.
const placedObjects = "the ConfigBundles FleetBundles placed (labelled " + hubv1alpha1.FleetBundleLabel + ")"

// memberObjects names what a registration may have in the member: its ClusterRoleBinding,
// ServiceAccount and token Secrets, and the shared ClusterRole; with RemovePlaced, the placed
// bundles first.
func (o *options) memberObjects() []string {
	if o.RemovePlaced {
		return append([]string{placedObjects}, o.identityObjects()...)
	}
	return o.identityObjects()
}

// identityObjects names the registration's identity in the member.
func (o *options) identityObjects() []string {
	return []string{
		"ClusterRoleBinding " + ClusterRoleBindingName(o.Name),
		"ServiceAccount " + o.MemberNamespace + "/" + ServiceAccountName(o.Name),
		fmt.Sprintf("token Secrets %s/%s* (annotated %s=%s; their tokens stay valid while they exist)", o.MemberNamespace, tokenSecretGenerateName(o.Name), RegistrationAnnotation, o.Name),
		"ClusterRole " + RBACName + " (unless another registration binds it)",
		"Role and RoleBinding " + o.MemberNamespace + "/" + RenewalRoleName(o.Name),
	}
}

// releaseTimeout bounds how long Unregister waits for the hub to let go of the member (delete its
// MemberCluster, having dropped the member) before it removes the placed bundles. A running hub
// does within a second; one that is not running never does. A variable for the tests.
var releaseTimeout = 15 * time.Second

// awaitRelease waits until the hub has let go of the member, whose Secret is gone, so that it
// places nothing there again once the placed bundles are removed: the hub deletes the
// MemberCluster Name (of this Secret namespace) once it has dropped the member, and places
// nothing in a member without one. If the MemberCluster is still there after releaseTimeout (no
// hub is running), awaitRelease deletes it itself (uid precondition), and says so.
func (o *options) awaitRelease(ctx context.Context, hub client.Client) (deleted bool, err error) {
	mc := &hubv1alpha1.MemberCluster{}
	gone := func(ctx context.Context) (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: o.Name}, mc)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading MemberCluster %s on the hub: %w", o.Name, err)
		}
		return mc.Spec.SecretRef.Namespace != o.SecretNamespace, nil // another Secret's: not this member's
	}
	// The poll ends on its own deadline rather than on a context's: each request still has the
	// caller's, and one made just before releaseTimeout is not refused for lack of time (the
	// client's rate limiter refuses a request that would outlast its context's deadline).
	deadline := time.Now().Add(releaseTimeout)
	timedOut := false
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		if done, err := gone(ctx); done || err != nil {
			return done, err
		}
		timedOut = !time.Now().Before(deadline)
		return timedOut, nil
	})
	if err != nil || !timedOut {
		return false, err
	}
	if err := deleteExactly(ctx, hub, mc); err != nil {
		return false, fmt.Errorf("no hub let go of the member within %s, and deleting its MemberCluster %s failed: %w", releaseTimeout, o.Name, err)
	}
	return true, nil
}

// removePlaced deletes the ConfigBundles FleetBundles placed in the member: those with
// FleetBundleLabel and FleetBundleUIDAnnotation, each as it was listed (uid precondition: one
// replaced meanwhile by another is left alone). It returns how many it deleted. A member that
// does not serve ConfigBundles holds none.
func removePlaced(ctx context.Context, member client.Client) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(configbundlev1alpha1.GroupVersion.WithKind("ConfigBundleList"))
	if err := member.List(ctx, list, client.HasLabels{hubv1alpha1.FleetBundleLabel}); meta.IsNoMatchError(err) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("listing them: %w", err)
	}
	removed := 0
	var errs []error
	for i := range list.Items {
		b := &list.Items[i]
		if b.Annotations[hubv1alpha1.FleetBundleUIDAnnotation] == "" {
			continue // not the hub's (the hub would report it as a Conflict)
		}
		b.SetGroupVersionKind(configbundlev1alpha1.GroupVersion.WithKind("ConfigBundle")) // list items carry none
		uid := b.UID
		switch err := member.Delete(ctx, b, client.Preconditions{UID: &uid}); {
		case err == nil:
			removed++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err): // gone, or another one now
		default:
			errs = append(errs, fmt.Errorf("%s/%s: %w", b.Namespace, b.Name, err))
		}
	}
	return removed, errors.Join(errs...)
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
