package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/hubmanager"
)

// newClusterSet creates the ClusterSet name selecting the members labelled key=yes, and deletes
// it when the test ends.
func newClusterSet(t *testing.T, name, key string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	cs := fleet.NewClusterSet(name, map[string]string{key: "yes"})
	g.Expect(fl.Hub.Create(ctx, cs)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(fl.Hub.Delete(ctx, cs))).To(Succeed()) })
}

// bind binds the ClusterSet set into the hub namespace ns as the fleet's administrator, and
// removes the binding when the test ends.
func bind(t *testing.T, ns, set string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	g.Expect(fl.Bind(ctx, nil, ns, set)).To(Succeed())
	t.Cleanup(func() { unbind(g, ns, set) })
}

// unbind deletes the binding of set into ns.
func unbind(g Gomega, ns, set string) {
	g.Expect(client.IgnoreNotFound(fl.Hub.Delete(context.Background(), fleet.NewClusterSetBinding(ns, set)))).To(Succeed())
}

// newUnboundFleetBundle creates, with c (the fleet's administrator if nil), FleetBundle ns/name
// selecting every member it may ({}), in a hub namespace it binds no set into, and deletes it
// (waiting until it is gone) and its ConfigMaps in members when the test ends.
func newUnboundFleetBundle(t *testing.T, c client.Client, ns, name, message string, members ...string) *hubv1alpha1.FleetBundle {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	g.Expect(fleet.EnsureNamespace(ctx, fl.Hub, ns)).To(Succeed())
	if c == nil {
		c = fl.Hub
	}
	fb := fleet.NewFleetBundle(ns, name, nil, configbundlev1alpha1.ConfigBundleSpec{Message: message})
	g.Eventually(func() error { return c.Create(ctx, fb) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	t.Cleanup(func() {
		deleteFleetBundle(g, fb)
		for _, m := range members { // the members run no garbage collector
			_ = fl.Member(m).Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
	})
	return fb
}

// placedIn returns a function listing the members (of those named) that hold a bundle of fb.
func placedIn(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) []string {
	return func(g Gomega) []string {
		out := []string{}
		for _, m := range members {
			if placed(m, fb)(g) != nil {
				out = append(out, m)
			}
		}
		return out
	}
}

// installTenancyRoles creates on the hub the ClusterRoles of config/rbac/hub/tenancy_roles.yaml
// (configbundle-hub-fleetbundle-editor, configbundle-hub-clusterset-admin and
// configbundle-hub-rollout-approver), as
// `kubectl apply -k config/default` does; roles that exist are kept.
func installTenancyRoles(g Gomega) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "hub", "tenancy_roles.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		g.Expect(yaml.UnmarshalStrict([]byte(doc), role)).To(Succeed())
		names = append(names, role.Name)
		g.Expect(client.IgnoreAlreadyExists(fl.Hub.Create(context.Background(), role))).To(Succeed())
	}
	g.Expect(names).To(ConsistOf(hubv1alpha1.FleetBundleEditorRole, hubv1alpha1.ClusterSetAdminRole, hubv1alpha1.RolloutApproverRole))
}

// grant binds user to the ClusterRole role, in namespace ns (a RoleBinding) or, with ns "",
// cluster-wide (a ClusterRoleBinding), and removes the binding when the test ends.
func grant(t *testing.T, user, role, ns string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	meta := metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	var b client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	if ns != "" {
		b = &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	}
	g.Expect(fl.Hub.Create(ctx, b)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(fl.Hub.Delete(ctx, b))).To(Succeed()) })
}

// impersonate returns a client of the hub acting as user, as `kubectl --as` does.
func impersonate(g Gomega, user string) client.Client {
	cfg := rest.CopyConfig(fl.HubPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	scheme, err := hubmanager.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestTenancyEditorPlacesOnlyIntoItsSets: a user with configbundle-hub-fleetbundle-editor
// in namespace N (impersonated, as `kubectl --as`) may not bind a set it was not let bind (the
// ValidatingAdmissionPolicy refuses it, naming clustersets/bind), relabel a MemberCluster, or
// create FleetBundles or bindings in another namespace; its FleetBundle selecting every member
// ({}) reaches only the member of the set the administrator bound into N. Once granted create on
// clustersets/bind of a second set (by name), it binds that set and its FleetBundle extends there,
// and still no further.
func TestTenancyEditorPlacesOnlyIntoItsSets(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	members := []string{"m1", "m2", "m3"}
	joined(t, members...)
	installTenancyRoles(g)
	const ns, otherNS, user = "tenancy-team-a", "tenancy-team-b", "team-a-developer"
	const givenKey, laterKey = "e2e.tenancy/given", "e2e.tenancy/later"
	const given, later = "e2e-tenancy-given", "e2e-tenancy-later"
	for _, m := range members {
		ensureNamespace(g, m, ns)
	}
	g.Expect(fleet.EnsureNamespace(ctx, fl.Hub, otherNS)).To(Succeed())
	selectMember(t, "m1", givenKey, "yes")
	selectMember(t, "m2", laterKey, "yes")
	newClusterSet(t, given, givenKey)
	newClusterSet(t, later, laterKey)
	bind(t, ns, given) // by the administrator

	// The kube-controller-manager that aggregates the editor's role into edit and admin may not
	// run here: the user is bound to the editor's role itself.
	grant(t, user, hubv1alpha1.FleetBundleEditorRole, ns)
	tenant := impersonate(g, user)

	// Its FleetBundle, selecting every member: the member of the set bound into N alone.
	fb := newUnboundFleetBundle(t, tenant, ns, "web", "team a", members...)
	everywhere(g, fb, "team a", "m1")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters.Selected", BeEquivalentTo(1))))
	g.Consistently(placedIn(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"m1"}))

	// It may create ClusterSetBindings in N, but not bind a set it was not let bind.
	err := tenant.Create(ctx, fleet.NewClusterSetBinding(ns, later))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring(hubv1alpha1.ClusterSetBindPermission), ContainSubstring(hubv1alpha1.ClusterSetBindPolicyName)))
	// Nor relabel a member into its sets.
	mc := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m2"}}
	err = tenant.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+givenKey+`":"yes"}}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden relabelling a MemberCluster, got %v", err)
	// Nor reach another namespace.
	err = tenant.Create(ctx, fleet.NewFleetBundle(otherNS, "web", nil, configbundlev1alpha1.ConfigBundleSpec{Message: "team a"}))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden creating a FleetBundle in %s, got %v", otherNS, err)
	err = tenant.Create(ctx, fleet.NewClusterSetBinding(otherNS, given))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden binding into %s, got %v", otherNS, err)
	g.Consistently(placedIn(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"m1"}))

	// Granted create on clustersets/bind of the set later alone (cluster-wide: sets are), it
	// binds later, and its FleetBundle extends to m2; m3, in no set of N, never gets it.
	bindLater := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenancy-bind-" + later},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{hubv1alpha1.GroupVersion.Group}, Resources: []string{hubv1alpha1.ClusterSetBindPermission},
			ResourceNames: []string{later}, Verbs: []string{hubv1alpha1.ClusterSetBindVerb}}}}
	g.Expect(fl.Hub.Create(ctx, bindLater)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(fl.Hub.Delete(ctx, bindLater))).To(Succeed()) })
	grant(t, user, bindLater.Name, "")
	g.Eventually(func() error { return tenant.Create(ctx, fleet.NewClusterSetBinding(ns, later)) }).
		WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the RBAC change reaches the authorizer")
	t.Cleanup(func() { unbind(g, ns, later) })
	everywhere(g, fb, "team a", "m1", "m2")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("Clusters.Selected", BeEquivalentTo(2)))
	g.Consistently(placedIn(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"m1", "m2"}))
	// Still only that set: binding any other is refused.
	err = tenant.Create(ctx, fleet.NewClusterSetBinding(ns, hubv1alpha1.HubName+"-absent"))
	g.Expect(err).To(MatchError(ContainSubstring(hubv1alpha1.ClusterSetBindPermission)))
}
