package spokeprovider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// guardTimeout bounds the hub installing or restoring its admission policies, and a member's
// API server starting to enforce them (its policy informer).
const guardTimeout = 20 * time.Second

// guardScheme knows ConfigBundles, besides the built-in kinds.
var guardScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), configbundlev1alpha1.AddToScheme(s)); err != nil {
		panic(err)
	}
	return s
}()

// startGuard starts a provider that keeps its admission policies in member-a, with the
// member's admin credential, and waits until they are in place. The policies are deleted when
// the test ends, after the provider stopped.
func startGuard(t *testing.T) *fixture {
	t.Helper()
	g := NewWithT(t)
	t.Cleanup(func() { deleteGuard(t, memberA) })
	opts := testOptions()
	opts.InstallGuard = true
	f := startProvider(t, opts)
	f.createSecret("guarded", memberA.Kubeconfig())
	f.waitReady(g, "guarded")
	g.Eventually(func() spokeprovider.GuardState { return f.state("guarded")().Guard }).WithTimeout(guardTimeout).WithPolling(interval).
		Should(HaveField("Reason", hubv1alpha1.GuardInstalledReason))
	g.Expect(f.state("guarded")().Guard.Status).To(Equal(metav1.ConditionTrue))
	return f
}

// deleteGuard deletes the hub's admission policies and bindings from cp.
func deleteGuard(t *testing.T, cp *controlplane.ControlPlane) {
	ctx, c := context.Background(), memberClients[cp]
	for _, name := range []string{hubv1alpha1.GuardPolicyName, hubv1alpha1.TakeOverPolicyName} {
		for _, obj := range []client.Object{
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		} {
			if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
				t.Errorf("deleting %s: %v", name, err)
			}
		}
	}
}

// impersonating is a client of cp's admin impersonating user, who has only the rights of role
// in namespace ns.
func impersonating(t *testing.T, cp *controlplane.ControlPlane, ns, user string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	g, ctx, admin := NewWithT(t), context.Background(), memberClients[cp]
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	g.Expect(admin.Create(ctx, role)).To(Succeed())
	g.Expect(admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return guardClient(t, cfg)
}

// guardClient is a client of cfg that knows ConfigBundles.
func guardClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: guardScheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newMemberNamespace creates a namespace of its own for a test in cp.
func newMemberNamespace(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "guard-"}}
	if err := memberClients[cp].Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// TestGuardRefusesChangesOfAGuardedConfigMap: with the hub's policies in a member, a user who
// may edit ConfigMaps can neither update nor delete one labelled configbundle.dev/guard, and the
// refusal names the ConfigBundle that controls it and says to change the bundle instead; the hub's
// own identity updates and deletes it; an unlabelled ConfigMap is the user's to change.
func TestGuardRefusesChangesOfAGuardedConfigMap(t *testing.T) {
	startGuard(t)
	g, ctx, admin := NewWithT(t), context.Background(), memberClients[memberA]
	ns := newMemberNamespace(t, memberA)
	user := impersonating(t, memberA, ns, "editor", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update", "patch", "delete"},
	})
	guarded := func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{configbundlev1alpha1.GuardLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle",
				Name: "web", UID: types.UID("00000000-0000-0000-0000-000000000001"), Controller: ptr.To(true)}},
		}, Data: map[string]string{"message": "hub's"}}
		g.Expect(admin.Create(ctx, cm)).To(Succeed()) // as the hub would
		return cm
	}
	cm := guarded("web")

	refusal := And(ContainSubstring("ConfigBundle web"), ContainSubstring("change the ConfigBundle web instead"))
	g.Eventually(func() error { // until the member's API server enforces the policy: a dry run goes through admission
		return user.Update(ctx, cm.DeepCopy(), client.DryRunAll)
	}).WithTimeout(guardTimeout).WithPolling(interval).Should(Satisfy(apierrors.IsForbidden))
	edited := cm.DeepCopy()
	edited.Data["message"] = "mine"
	err := user.Update(ctx, edited)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(refusal))
	err = user.Delete(ctx, cm)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(refusal))
	unlabel := cm.DeepCopy()
	unlabel.Labels = nil
	g.Expect(user.Update(ctx, unlabel)).To(Satisfy(apierrors.IsForbidden), "removing the label is an update like any other")

	// The hub's own identity passes.
	edited = cm.DeepCopy()
	edited.Data["message"] = "hub's, updated"
	g.Expect(admin.Update(ctx, edited)).To(Succeed())
	g.Expect(admin.Delete(ctx, edited)).To(Succeed())

	// A ConfigMap without the label is not the guard's.
	free := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free"}, Data: map[string]string{"k": "v"}}
	g.Expect(admin.Create(ctx, free)).To(Succeed())
	free.Data["k"] = "w"
	g.Expect(user.Update(ctx, free)).To(Succeed())
	g.Expect(user.Delete(ctx, free)).To(Succeed())
}

// TestTakeOverNeedsTheRightToUpdateTheConfigMap: a user who may write ConfigBundles but not
// update the ConfigMap of a bundle's name may not create or change a bundle whose takeOver is
// not Never; with takeOver Never, or with the right on that ConfigMap, the user may (with target
// Secret, the right on the Secret is asked); the hub's own identity always may.
func TestTakeOverNeedsTheRightToUpdateTheConfigMap(t *testing.T) {
	startGuard(t)
	g, ctx, admin := NewWithT(t), context.Background(), guardClient(t, memberA.Config)
	ns := newMemberNamespace(t, memberA)
	bundles := rbacv1.PolicyRule{APIGroups: []string{configbundlev1alpha1.GroupVersion.Group}, Resources: []string{"configbundles"},
		Verbs: []string{"get", "create", "update"}}
	author := impersonating(t, memberA, ns, "author", bundles)
	owner := impersonating(t, memberA, ns, "owner", bundles, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"aws-auth"}, Verbs: []string{"update"},
	})
	bundle := func(name string, policy configbundlev1alpha1.TakeOver) *configbundlev1alpha1.ConfigBundle {
		return &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "x", TakeOver: policy}}
	}

	g.Eventually(func() error { // until the member's API server enforces the policy: a dry run goes through admission
		return author.Create(ctx, bundle("aws-auth", configbundlev1alpha1.TakeOverAlways), client.DryRunAll)
	}).WithTimeout(guardTimeout).WithPolling(interval).Should(Satisfy(apierrors.IsForbidden))
	g.Expect(author.Create(ctx, bundle("aws-auth", configbundlev1alpha1.TakeOverAlways))).To(And(Satisfy(apierrors.IsForbidden), MatchError(And(
		ContainSubstring("spec.takeOver Always"), ContainSubstring("ConfigMap "+ns+"/aws-auth"), ContainSubstring("author may not update")))))
	g.Expect(author.Create(ctx, bundle("aws-auth", configbundlev1alpha1.TakeOverIfNoDiff))).To(Satisfy(apierrors.IsForbidden))
	never := bundle("aws-auth", configbundlev1alpha1.TakeOverNever)
	g.Expect(author.Create(ctx, never)).To(Succeed(), "takeOver Never takes nothing over")
	never.Spec.TakeOver = configbundlev1alpha1.TakeOverAlways
	g.Expect(author.Update(ctx, never)).To(Satisfy(apierrors.IsForbidden), "nor may the author change it to take over")

	g.Expect(owner.Update(ctx, never)).To(Succeed(), "a user who may update the ConfigMap may take it over")
	asSecret := never.DeepCopy()
	asSecret.Spec.Message, asSecret.Spec.Target = "", configbundlev1alpha1.TargetSecret
	g.Expect(owner.Update(ctx, asSecret)).To(And(Satisfy(apierrors.IsForbidden), MatchError(ContainSubstring("take over Secret "+ns+"/aws-auth"))),
		"with target Secret, the right to update the Secret is asked")
	g.Expect(owner.Create(ctx, bundle("other", configbundlev1alpha1.TakeOverAlways))).To(Satisfy(apierrors.IsForbidden),
		"only the ConfigMap the user may update")
	g.Expect(admin.Create(ctx, bundle("other", configbundlev1alpha1.TakeOverAlways))).To(Succeed(), "the hub's own identity passes")
}

// TestGuardIsRestored: a policy or binding of the hub that a member admin deletes or weakens is
// applied again at once, with a GuardRestored Event on the MemberCluster; the member stays
// Guarded.
func TestGuardIsRestored(t *testing.T) {
	f := startGuard(t)
	g, ctx, admin := NewWithT(t), context.Background(), memberClients[memberA]
	// As the member's API server stores them, they are what the hub wants: a hub that joins again
	// writes nothing.
	cs, err := kubernetes.NewForConfig(memberA.Config)
	g.Expect(err).NotTo(HaveOccurred())
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	policies, bindings := spokeprovider.GuardPolicies(who.Status.UserInfo.Username)
	for _, want := range policies {
		got := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(want), got)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(got.Spec, want.Spec)).To(BeTrue(), "policy %s as stored:\n%s", want.Name, cmp.Diff(want.Spec, got.Spec))
	}
	for _, want := range bindings {
		got := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(want), got)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(got.Spec, want.Spec)).To(BeTrue(), "binding %s as stored:\n%s", want.Name, cmp.Diff(want.Spec, got.Spec))
	}

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: hubv1alpha1.GuardPolicyName}, policy)).To(Succeed())

	g.Expect(admin.Delete(ctx, policy)).To(Succeed())
	g.Eventually(func(g Gomega) types.UID {
		got := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: hubv1alpha1.GuardPolicyName}, got)).To(Succeed())
		return got.UID
	}).WithTimeout(guardTimeout).WithPolling(interval).ShouldNot(Equal(policy.UID), "the hub installs it again")

	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: hubv1alpha1.GuardPolicyName}, binding)).To(Succeed())
	binding.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
	g.Expect(admin.Update(ctx, binding)).To(Succeed())
	g.Eventually(func(g Gomega) []admissionregistrationv1.ValidationAction {
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: hubv1alpha1.GuardPolicyName}, binding)).To(Succeed())
		return binding.Spec.ValidationActions
	}).WithTimeout(guardTimeout).WithPolling(interval).Should(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))

	g.Eventually(func(g Gomega) int32 { // the recorder may count both in one Event's series
		var n int32
		for _, e := range memberEvents("guarded", hubv1alpha1.GuardRestoredEvent)(g) {
			n++
			if e.Series != nil {
				n += e.Series.Count - 1
			}
		}
		return n
	}).WithTimeout(guardTimeout).WithPolling(interval).Should(BeEquivalentTo(2))
	g.Expect(f.state("guarded")().Guard.Status).To(Equal(metav1.ConditionTrue))
}

// TestGuardUnavailable: a member whose API server serves no ValidatingAdmissionPolicy (the suite's
// hub, joined as a member) is Ready, and Guarded=False with GuardUnavailable.
func TestGuardUnavailable(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	opts := testOptions()
	opts.InstallGuard = true
	f := startProvider(t, opts)
	f.createSecret("old", hub.Kubeconfig())
	f.waitReady(g, "old")
	g.Eventually(func() spokeprovider.GuardState { return f.state("old")().Guard }).WithTimeout(guardTimeout).WithPolling(interval).
		Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", hubv1alpha1.GuardUnavailableReason),
			HaveField("Message", ContainSubstring("admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy"))))
	g.Consistently(f.state("old")).WithTimeout(quietPeriod).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
}
