package registration_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/registration"
)

// snapshot lists what registrations may have written, with resourceVersions: in the member, the
// objects labelled as Register's (ServiceAccounts, token Secrets, ClusterRoles,
// ClusterRoleBindings); on the hub, the Secrets of the Secret namespace and the MemberClusters.
// Equal snapshots mean nothing was written.
func snapshot(g Gomega) []string {
	ctx := context.Background()
	managed := client.MatchingLabels{hubv1alpha1.ManagedByLabel: registration.FieldOwner}
	var out []string
	add := func(c client.Client, list client.ObjectList, opts ...client.ListOption) {
		g.Expect(c.List(ctx, list, opts...)).To(Succeed())
		g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			out = append(out, fmt.Sprintf("%T %s/%s %s", obj, obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()))
			return nil
		})).To(Succeed())
	}
	add(memberAdmin, &corev1.ServiceAccountList{}, managed)
	add(memberAdmin, &corev1.SecretList{}, managed)
	add(memberAdmin, &rbacv1.ClusterRoleList{}, managed)
	add(memberAdmin, &rbacv1.ClusterRoleBindingList{}, managed)
	add(hubAdmin, &corev1.SecretList{}, client.InNamespace(hubv1alpha1.DefaultSecretNamespace))
	add(hubAdmin, &hubv1alpha1.MemberClusterList{})
	slices.Sort(out)
	return out
}

// kubeconfigOf returns the kubeconfig in the hub Secret of the member name.
func kubeconfigOf(g Gomega, name string) []byte {
	raw, _ := kubeconfigIn(g, hubSecret(g, hubv1alpha1.DefaultSecretNamespace, name), hubv1alpha1.DefaultSecretKey)
	return raw
}

// identify returns a function reading the member's kube-system namespace with c: what the hub
// does first with its credential.
func identify(c client.Client) func() error {
	return func() error {
		return c.Get(context.Background(), client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})
	}
}

// reportCluster creates the MemberCluster name on the hub with status.clusterID id, as the hub
// would once connected, and deletes it when the test ends.
func reportCluster(t *testing.T, g Gomega, name, id string) {
	mc := &hubv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: name}},
	}
	g.Expect(hubAdmin.Create(t.Context(), mc)).To(Succeed())
	t.Cleanup(func() { _ = hubAdmin.Delete(context.Background(), mc) })
	mc.Status.ClusterID = id
	g.Expect(hubAdmin.Status().Update(t.Context(), mc)).To(Succeed())
}

func TestDuplicateClusterIsRefusedUnlessForced(t *testing.T) {
	g := NewWithT(t)
	register(t, baseOptions("dup-first"))
	first := memberClientFor(g, kubeconfigOf(g, "dup-first"))

	// The same cluster under a second name: refused, naming the first, and nothing is written.
	before := snapshot(g)
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	_, err := registration.Register(ctx, baseOptions("dup-second"))
	g.Expect(err).To(MatchError(registration.ErrDuplicateCluster))
	t.Logf("error: %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring(`member "dup-first"`), ContainSubstring(memberClusterID(g)), ContainSubstring("--force")))
	g.Expect(snapshot(g)).To(Equal(before), "a refused registration writes nothing")

	// Forced: the second name gets an identity of its own.
	forced := baseOptions("dup-second")
	forced.Force = true
	register(t, forced)
	second := memberClientFor(g, kubeconfigOf(g, "dup-second"))
	g.Expect(registration.ServiceAccountName("dup-second")).NotTo(Equal(registration.ServiceAccountName("dup-first")))
	for _, name := range []string{"dup-first", "dup-second"} {
		g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.ServiceAccountName(name)}, &corev1.ServiceAccount{})).To(Succeed())
		g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Name: registration.ClusterRoleBindingName(name)}, &rbacv1.ClusterRoleBinding{})).To(Succeed())
	}

	// Unregistering the second revokes its token, and only its.
	g.Expect(unregister(ctx, baseOptions("dup-second"))).To(Succeed())
	g.Eventually(identify(second)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized))
	g.Expect(identify(first)()).To(Succeed(), "the first registration's token still works")
	g.Expect(first.List(ctx, &corev1.ConfigMapList{})).To(Succeed(), "and is still granted the member role")
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRole{})).To(Succeed(), "the shared ClusterRole stays")
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Name: registration.ClusterRoleBindingName("dup-first")}, &rbacv1.ClusterRoleBinding{})).To(Succeed())
	g.Expect(hubAdmin.Get(ctx, client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "dup-first"}, &corev1.Secret{})).To(Succeed())
}

func TestUnregisterRefusesAndChangesNothing(t *testing.T) {
	g := NewWithT(t)
	register(t, baseOptions("healthy"))
	healthy := memberClientFor(g, kubeconfigOf(g, "healthy"))
	// A member Secret made by hand: no cluster id recorded, no MemberCluster reporting one.
	handMade := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "hand-made",
			Labels: map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}},
		Data: map[string][]byte{hubv1alpha1.DefaultSecretKey: kubeconfigOf(g, "healthy")},
	}
	g.Expect(hubAdmin.Create(t.Context(), handMade)).To(Succeed())
	t.Cleanup(func() { _ = hubAdmin.Delete(context.Background(), handMade) })
	before := snapshot(g)

	otherCluster := baseOptions("healthy")
	otherCluster.Member = rest.CopyConfig(hubCP.Config) // the hub cluster: another kube-system uid
	for _, tc := range []struct {
		name string
		opts registration.Options
		want error
		says []string
	}{
		{"a name never registered", baseOptions("ghost"), registration.ErrNotRegistered,
			[]string{`"ghost"`, "no Secret configbundle-system/ghost", `"healthy"`}},
		{"credentials of another cluster", otherCluster, registration.ErrOtherCluster,
			[]string{`"healthy"`, memberClusterID(g), "--member-context"}},
		{"no cluster id known", baseOptions("hand-made"), registration.ErrUnknownCluster,
			[]string{registration.ClusterIDAnnotation, "kubectl -n configbundle-system delete secret hand-made"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
			defer cancel()
			err := unregister(ctx, tc.opts)
			g.Expect(err).To(MatchError(tc.want))
			t.Logf("error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring("nothing was changed"))
			for _, s := range tc.says {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
			g.Expect(snapshot(g)).To(Equal(before), "a refused unregistration changes nothing")
		})
	}
	g.Expect(identify(healthy)()).To(Succeed(), "the registered member's token still works")
}

func TestRotationRevokesThePreviousToken(t *testing.T) {
	g := NewWithT(t)
	opts := baseOptions("member-revoke")
	register(t, opts)
	old := memberClientFor(g, kubeconfigOf(g, "member-revoke"))
	g.Expect(identify(old)()).To(Succeed())

	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	res, err := registration.Register(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RevokedTokens).To(Equal(1))
	registered := time.Now()
	g.Eventually(identify(old)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized), "the previous token is revoked")
	t.Logf("the previous token was refused %s after the new registration", time.Since(registered).Round(time.Millisecond))
	g.Expect(identify(memberClientFor(g, kubeconfigOf(g, "member-revoke")))()).To(Succeed(), "the new token works")
	g.Expect(tokenSecretsOf(g, hubv1alpha1.DefaultSecretNamespace, "member-revoke")).To(HaveLen(1))
}

func TestLabelsLandOnTheMemberCluster(t *testing.T) {
	g := NewWithT(t)
	opts := baseOptions("member-labels")
	opts.Labels = map[string]string{"env": "prod", "example.com/region": "eu"}
	register(t, opts)
	mc := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-labels"}}
	t.Cleanup(func() { _ = hubAdmin.Delete(context.Background(), mc) })

	// No hub runs here: Register created the MemberCluster.
	g.Expect(hubAdmin.Get(t.Context(), client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.Labels).To(And(HaveKeyWithValue("env", "prod"), HaveKeyWithValue("example.com/region", "eu")))
	g.Expect(mc.Spec.SecretRef).To(Equal(hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "member-labels"}))
	g.Expect(mc.ManagedFields).To(ContainElement(And(
		HaveField("Manager", registration.FieldOwner), HaveField("Operation", metav1.ManagedFieldsOperationApply))))

	// Someone else labels it too; registering again with other labels replaces Register's own.
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Labels["team"] = "platform"
	g.Expect(hubAdmin.Patch(t.Context(), mc, patch, client.FieldOwner("someone-else"))).To(Succeed())
	opts.Labels = map[string]string{"env": "staging"}
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	_, err := registration.Register(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubAdmin.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.Labels).To(And(HaveKeyWithValue("env", "staging"), HaveKeyWithValue("team", "platform"), Not(HaveKey("example.com/region"))))

	// WaitReady says why the member is not Ready, and returns once it is.
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	_, err = registration.WaitReady(short, opts)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(err.Error()).To(ContainSubstring(`member "member-labels" is not Ready`))
	t.Logf("error: %v", err)
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: hubv1alpha1.ConnectedReason})
	g.Expect(hubAdmin.Status().Update(ctx, mc)).To(Succeed())
	got, err := registration.WaitReady(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Labels).To(HaveKeyWithValue("env", "staging"))
}

// TestLegacyRegistrations: registrations made when every name shared the ServiceAccount
// configbundle-hub and the ClusterRoleBinding configbundle-hub-member. Their identity is removed
// once no registration on the hub may still use it, and not before.
func TestLegacyRegistrations(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*requestTimeout)
	defer cancel()
	legacy := makeLegacyRegistration(t, g, "old-a", "old-b")
	id := memberClusterID(g)
	reportCluster(t, g, "old-a", id) // old-b's cluster is unknown

	// Registering old-a again gives it its own identity; the legacy one stays: old-b may use it.
	_, err := registration.Register(ctx, baseOptions("old-a"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = unregister(context.Background(), baseOptions("old-a")) })
	oldA := memberClientFor(g, kubeconfigOf(g, "old-a"))
	g.Expect(identify(oldA)()).To(Succeed())
	g.Expect(identify(legacy)()).To(Succeed(), "the legacy token still works")

	// old-b cannot be unregistered while its cluster is unknown.
	err = unregister(ctx, baseOptions("old-b"))
	g.Expect(err).To(MatchError(registration.ErrUnknownCluster))

	// Once it is known, unregistering old-b removes the legacy identity, which nothing uses any
	// more, and revokes its token; old-a's keeps working.
	reportCluster(t, g, "old-b", id)
	g.Expect(unregister(ctx, baseOptions("old-b"))).To(Succeed())
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRoleBinding{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.LegacyServiceAccountName}, &corev1.ServiceAccount{})).
		To(Satisfy(apierrors.IsNotFound))
	g.Eventually(identify(legacy)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized))
	g.Expect(identify(oldA)()).To(Succeed())
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRole{})).To(Succeed(), "old-a still binds the ClusterRole")
}

// makeLegacyRegistration sets up what Register made before each registration had its own
// identity, for the member names: the ServiceAccount configbundle-hub bound to the ClusterRole by
// the ClusterRoleBinding configbundle-hub-member, and one hub Secret per name, without a cluster
// id, with a token of that ServiceAccount. It returns a client with that token.
func makeLegacyRegistration(t *testing.T, g Gomega, names ...string) client.Client {
	ctx := t.Context()
	labels := map[string]string{hubv1alpha1.ManagedByLabel: registration.FieldOwner}
	ns := hubv1alpha1.DefaultSecretNamespace
	if err := memberAdmin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	role := memberRole(g)
	role.ObjectMeta = metav1.ObjectMeta{Name: registration.RBACName, Labels: labels}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: registration.LegacyServiceAccountName, Labels: labels}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: registration.RBACName, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: registration.RBACName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: registration.LegacyServiceAccountName}},
	}
	for _, obj := range []client.Object{role, sa, binding} {
		if err := memberAdmin.Create(ctx, obj); !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() { _ = memberAdmin.Delete(context.Background(), obj) })
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	g.Expect(memberAdmin.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	kubeconfig, err := registration.BuildKubeconfig("legacy", memberURL, memberCP.Config, tr.Status.Token)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range names {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}},
			Data:       map[string][]byte{hubv1alpha1.DefaultSecretKey: kubeconfig},
		}
		g.Expect(hubAdmin.Create(ctx, s)).To(Succeed())
		t.Cleanup(func() { _ = hubAdmin.Delete(context.Background(), s) })
	}
	c := memberClientFor(g, kubeconfig)
	g.Eventually(identify(c)).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return c
}

// The hub cluster itself is refused as a member, changing nothing, unless AllowHubAsMember.
func TestHubAsMemberIsRefusedUnlessAllowed(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	self := baseOptions("hub-itself")
	self.Member = rest.CopyConfig(hubCP.Config)
	self.Force = true // does not allow it

	_, err := registration.Register(ctx, self)
	g.Expect(err).To(MatchError(registration.ErrHubAsMember))
	g.Expect(err.Error()).To(And(ContainSubstring("refused, nothing was changed"), ContainSubstring("--member-context"), ContainSubstring("--allow-hub-as-member")))
	t.Logf("error: %v", err)
	sa := client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.ServiceAccountName("hub-itself")}
	g.Expect(hubAdmin.Get(ctx, sa, &corev1.ServiceAccount{})).To(Satisfy(apierrors.IsNotFound), "no identity in the hub cluster")
	g.Expect(hubAdmin.Get(ctx, client.ObjectKey{Name: registration.ClusterRoleBindingName("hub-itself")}, &rbacv1.ClusterRoleBinding{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(hubAdmin.Get(ctx, client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "hub-itself"}, &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))

	// Allowed, it is a member like any other; unregistering it removes nothing placed (the hub
	// cluster serves no ConfigBundles).
	self.Force, self.AllowHubAsMember = false, true
	res, err := registration.Register(ctx, self)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ClusterID).NotTo(BeEmpty())
	g.Expect(hubAdmin.Get(ctx, sa, &corev1.ServiceAccount{})).To(Succeed())
	self.RemovePlaced = true
	gone, err := registration.Unregister(ctx, self)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*gone).To(Equal(registration.Unregistration{}))
	g.Expect(hubAdmin.Get(ctx, sa, &corev1.ServiceAccount{})).To(Satisfy(apierrors.IsNotFound))
}
