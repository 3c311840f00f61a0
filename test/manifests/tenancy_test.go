package manifests

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// impersonating returns a client of cp acting as user (impersonated by its admin).
func impersonating(t *testing.T, cp *rest.Config, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return newClient(t, cfg)
}

// bindRefused creates the binding of set into ns with c until the bind policy refuses it (the
// API server loads a new policy within a second or so; a binding made before it did is deleted
// and tried again), and returns the refusal.
func bindRefused(g Gomega, admin, c client.Client, ns, set string) error {
	ctx := context.Background()
	var refusal error
	g.Eventually(func(g Gomega) {
		b := fleet.NewClusterSetBinding(ns, set)
		err := c.Create(ctx, b)
		if err == nil {
			g.Expect(admin.Delete(ctx, b)).To(Succeed())
		}
		g.Expect(err).To(HaveOccurred(), "the bind policy is not in force yet")
		refusal = err
	}).WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed())
	return refusal
}

// TestTenancyModel installs config/default (but the Deployment) on a hub cluster and checks, on
// the real API server's RBAC and admission, what its tenancy model promises: a user with
// configbundle-hub-fleetbundle-editor in namespace N manages FleetBundles and ClusterSetBindings
// there and nowhere else, may not relabel MemberClusters, and may not bind a set it was not let
// bind (refused by the ValidatingAdmissionPolicy, naming clustersets/bind); granted create on
// clustersets/bind of one set (by name, cluster-wide: a RoleBinding of it in N is not enough),
// it binds that set and no other; a user with
// configbundle-hub-clusterset-admin binds any set.
func TestTenancyModel(t *testing.T) {
	g := NewWithT(t)
	cp := controlPlane(t, "hub")
	admin := adminClient(t, cp)
	ctx := t.Context()
	objs := render(t, "default")
	installPrerequisites(t, admin, objs)
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			g.Expect(apply(ctx, admin, u)).To(Succeed(), id(u))
		}
	}

	const ns, other, tenant, setAdmin = "tenancy-a", "tenancy-b", "tenancy-tenant", "tenancy-set-admin"
	const mine, theirs = "tenancy-mine", "tenancy-theirs"
	for _, n := range []string{ns, other} {
		g.Expect(fleet.EnsureNamespace(ctx, admin, n)).To(Succeed())
	}
	for _, s := range []string{mine, theirs} {
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, fleet.NewClusterSet(s, map[string]string{"team": s})))).To(Succeed())
	}
	mc := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "tenancy-member"},
		Spec: hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: namespace, Name: "tenancy-member"}}}
	g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, mc))).To(Succeed())
	bindRole := func(name, kind, role, user, in string) {
		subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		var b client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}
		if kind == "RoleBinding" {
			b = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: in, Name: name}, RoleRef: ref, Subjects: subjects}
		}
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, b))).To(Succeed())
	}
	bindRole("tenancy-editor", "RoleBinding", hubv1alpha1.FleetBundleEditorRole, tenant, ns)
	bindRole("tenancy-set-admin", "ClusterRoleBinding", hubv1alpha1.ClusterSetAdminRole, setAdmin, "")
	as := impersonating(t, cp.Config, tenant)
	forbidden := func(err error) bool { return apierrors.IsForbidden(err) }

	// RBAC reaches the authorizer through informers: the tenant's first FleetBundle, eventually.
	fb := fleet.NewFleetBundle(ns, "web", nil, configbundlev1alpha1.ConfigBundleSpec{Message: "mine"})
	g.Eventually(func() error { return as.Create(ctx, fb.DeepCopy(), client.DryRunAll) }).
		WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed(), "a FleetBundle in its namespace")
	g.Expect(as.Create(ctx, fleet.NewFleetBundle(other, "web", nil, configbundlev1alpha1.ConfigBundleSpec{Message: "theirs"}), client.DryRunAll)).
		To(MatchError(forbidden, "IsForbidden"), "a FleetBundle in another namespace")
	g.Expect(as.Create(ctx, fleet.NewClusterSetBinding(other, mine), client.DryRunAll)).
		To(MatchError(forbidden, "IsForbidden"), "a ClusterSetBinding in another namespace")
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"`+mine+`"}}}`))
	g.Expect(as.Patch(ctx, mc.DeepCopy(), patch)).To(MatchError(forbidden, "IsForbidden"), "kubectl label mc")
	g.Expect(as.Create(ctx, fleet.NewClusterSet("tenancy-own", nil))).To(MatchError(forbidden, "IsForbidden"), "a ClusterSet of its own")

	// RBAC lets it create ClusterSetBindings in its namespace; the bind policy refuses each set it
	// may not bind, naming the permission.
	refusal := bindRefused(g, admin, as, ns, mine)
	g.Expect(refusal).To(MatchError(forbidden, "IsForbidden"))
	g.Expect(refusal.Error()).To(And(ContainSubstring(hubv1alpha1.ClusterSetBindPermission), ContainSubstring(hubv1alpha1.ClusterSetBindPolicyName),
		ContainSubstring("binding ClusterSet "+mine+" into namespace "+ns), ContainSubstring(tenant)))

	// Let it bind mine, by name: it binds mine, still not theirs. ClusterSets are cluster-scoped,
	// and so is the policy's check: a RoleBinding of the permission in its namespace, which the
	// authorizer grants for that namespace alone, is not enough; a ClusterRoleBinding is.
	for _, s := range []string{mine, theirs} {
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "bind-" + s},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{hubv1alpha1.GroupVersion.Group}, Resources: []string{hubv1alpha1.ClusterSetBindPermission},
				ResourceNames: []string{s}, Verbs: []string{hubv1alpha1.ClusterSetBindVerb}}},
		}))).To(Succeed())
	}
	bindRole("bind-"+theirs, "RoleBinding", "bind-"+theirs, tenant, ns)
	cs, err := kubernetes.NewForConfig(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) bool {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: tenant, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: hubv1alpha1.ClusterSetBindVerb,
				Group: hubv1alpha1.GroupVersion.Group, Resource: "clustersets", Subresource: hubv1alpha1.ClusterSetBindSubresource, Name: theirs},
		}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return r.Status.Allowed
	}).WithTimeout(establishTimeout).WithPolling(interval).Should(BeTrue(), "the authorizer knows the RoleBinding")
	g.Expect(as.Create(ctx, fleet.NewClusterSetBinding(ns, theirs), client.DryRunAll)).To(MatchError(ContainSubstring(hubv1alpha1.ClusterSetBindPermission)),
		"a RoleBinding of clustersets/bind does not let a set be bound")
	bindRole("bind-"+mine, "ClusterRoleBinding", "bind-"+mine, tenant, "")
	g.Eventually(func() error { return as.Create(ctx, fleet.NewClusterSetBinding(ns, mine), client.DryRunAll) }).
		WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed(), "binding the set it may bind")
	g.Expect(as.Create(ctx, fleet.NewClusterSetBinding(ns, theirs), client.DryRunAll)).To(MatchError(ContainSubstring(hubv1alpha1.ClusterSetBindPermission)))

	// The set administrator binds any set, anywhere, and relabels members.
	sa := impersonating(t, cp.Config, setAdmin)
	g.Eventually(func() error { return sa.Create(ctx, fleet.NewClusterSetBinding(other, theirs), client.DryRunAll) }).
		WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed())
	g.Expect(sa.Patch(ctx, mc.DeepCopy(), patch, client.DryRunAll)).To(Succeed())

	// A binding is named after the set it binds (CEL): a tenant cannot pass a set it may bind off
	// as another.
	g.Expect(as.Create(ctx, &hubv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mine},
		Spec: hubv1alpha1.ClusterSetBindingSpec{ClusterSet: theirs}}, client.DryRunAll)).To(MatchError(ContainSubstring("metadata.name must equal spec.clusterSet")))
}
