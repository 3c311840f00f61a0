package spokeprovider_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	hubconfig "configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// rightsTimeout bounds noticing a change of the credential's rights: a few probes.
const rightsTimeout = 15 * time.Second

// TestFaultRightsLost: a member whose credential loses the rights the hub needs (its
// ClusterRoleBinding deleted, or one verb taken from its ClusterRole) is Forbidden at the next
// probe, the message naming each verb and resource refused; given them back, it is Connected again
// at the next probe, and OnReady has its bundles resynced.
func TestFaultRightsLost(t *testing.T) {
	g, ctx := NewWithT(t), t.Context()
	member, err := hubconfig.MemberClusterRole()
	g.Expect(err).NotTo(HaveOccurred())
	rules := slices.DeleteFunc(member.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, "apiextensions.k8s.io") })
	opts := testOptions()
	opts.Rights = spokeprovider.RightsOf(rules)
	f := startProvider(t, opts)

	// A user of member-a bound to the rules of the member ClusterRole, as `hub register` binds the
	// hub's ServiceAccount.
	c, user := memberClients[memberA], "rights-"+f.ns
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	g.Expect(c.Create(ctx, role)).To(Succeed())
	binding := func() *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
	}
	g.Expect(c.Create(ctx, binding())).To(Succeed())
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), binding())
		_ = c.Delete(context.Background(), role)
	})
	cfg, err := memberA.AddUser(user, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kc, err := controlplane.KubeconfigFor(memberA.Name, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	f.createSecret("rights", kc)
	f.waitReady(g, "rights")

	// The binding deleted: Forbidden at the next probe, naming what the hub may no longer do.
	g.Expect(c.Delete(ctx, binding())).To(Succeed())
	lost := time.Now()
	g.Eventually(f.state("rights")).WithTimeout(rightsTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.ForbiddenReason))
	t.Logf("Forbidden %v after the ClusterRoleBinding's deletion (probe interval %v)", time.Since(lost).Round(time.Millisecond), probeInterval)
	g.Expect(f.state("rights")().Message).To(And(
		HavePrefix("the hub's credential may not "),
		ContainSubstring("update configmaps"), ContainSubstring("list configbundles.configbundle.dev"),
		ContainSubstring("update configbundles.configbundle.dev/status"), ContainSubstring("create events.events.k8s.io"),
		ContainSubstring("get namespaces named kube-system")))
	g.Expect(f.provider.Connected("rights")).To(MatchError(spokeprovider.ErrNotConnected))

	// Bound again, but the ClusterRole lost one verb: the message names those rights alone.
	g.Expect(update(ctx, c, role, func(r *rbacv1.ClusterRole) {
		r.Rules[0].Verbs = slices.DeleteFunc(r.Rules[0].Verbs, func(v string) bool { return v == "update" })
	})).To(Succeed())
	g.Expect(role.Rules[0].Resources).To(Equal([]string{"configmaps", "secrets"}))
	g.Expect(c.Create(ctx, binding())).To(Succeed())
	g.Eventually(func() string { return f.state("rights")().Message }).WithTimeout(rightsTimeout).WithPolling(interval).Should(
		HavePrefix("the hub's credential may not update configmaps, update secrets ("))
	g.Expect(f.state("rights")()).To(beNotReady(hubv1alpha1.ForbiddenReason))

	// Every right back: Connected at the next probe, and its bundles are resynced.
	readies := len(f.history.readiesOf("rights"))
	g.Expect(update(ctx, c, role, func(r *rbacv1.ClusterRole) { r.Rules = rules })).To(Succeed())
	restored := time.Now()
	g.Eventually(f.state("rights")).WithTimeout(rightsTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
	t.Logf("Connected %v after the rights were restored", time.Since(restored).Round(time.Millisecond))
	g.Expect(f.provider.Connected("rights")).To(Succeed())
	g.Eventually(func() int { return len(f.history.readiesOf("rights")) }).WithTimeout(rightsTimeout).WithPolling(interval).
		Should(Equal(readies+1), "its bundles are resynced")
}

// update changes obj with mutate and writes it, retrying on conflicts.
func update[T client.Object](ctx context.Context, c client.Client, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj)
	})
}
