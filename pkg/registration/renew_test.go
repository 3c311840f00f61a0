package registration_test

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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/registration"
	"configbundle.dev/hub/pkg/sharding"
)

// TestRenewalDecision: a token is renewed once 80% of its life has passed, whatever its length;
// until then the hub waits exactly that long.
func TestRenewalDecision(t *testing.T) {
	t.Parallel()
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		life      time.Duration
		now       time.Duration // since issued
		wantAt    time.Duration // since issued
		wantAfter time.Duration
	}{
		{name: "a day, just issued", life: 24 * time.Hour, now: 0, wantAt: 19*time.Hour + 12*time.Minute, wantAfter: 19*time.Hour + 12*time.Minute},
		{name: "a day, half way", life: 24 * time.Hour, now: 12 * time.Hour, wantAt: 19*time.Hour + 12*time.Minute, wantAfter: 7*time.Hour + 12*time.Minute},
		{name: "a day, due", life: 24 * time.Hour, now: 19*time.Hour + 12*time.Minute, wantAt: 19*time.Hour + 12*time.Minute, wantAfter: 0},
		{name: "a day, overdue (a failed renewal retried)", life: 24 * time.Hour, now: 23 * time.Hour, wantAt: 19*time.Hour + 12*time.Minute, wantAfter: 0},
		{name: "a day, expired", life: 24 * time.Hour, now: 25 * time.Hour, wantAt: 19*time.Hour + 12*time.Minute, wantAfter: 0},
		{name: "the shortest token", life: registration.MinTokenDuration, now: time.Minute, wantAt: 8 * time.Minute, wantAfter: 7 * time.Minute},
		{name: "the default year", life: registration.DefaultTokenDuration, now: 0, wantAt: 7008 * time.Hour, wantAfter: 7008 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			at := registration.RenewAt(issued, issued.Add(tc.life))
			g.Expect(at).To(Equal(issued.Add(tc.wantAt)))
			g.Expect(registration.UntilRenewal(issued.Add(tc.now), at)).To(Equal(tc.wantAfter))
		})
	}
}

// renewer is a Renewer of the hub's Secrets through hub, whose clock runs ahead by ahead.
func renewer(hub client.Client, ahead time.Duration) *registration.Renewer {
	r := registration.NewRenewer(hub, hubv1alpha1.DefaultSecretKey, "configbundle-hub/test", sharding.Replica{})
	registration.SetClock(r, func() time.Time { return time.Now().Add(ahead) })
	return r
}

// renewedMember is the member of TestRenewerRenewsTheToken.
const renewedMember = "member-renew"

// renew reconciles renewedMember's Secret once with r.
func renew(r *registration.Renewer) (reconcile.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	return r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: renewedMember}})
}

// TestRenewerRenewsTheToken: with a token of the shortest life the API server issues (10
// minutes), a renewer whose clock says 9 minutes have passed requests a new token for the
// registration's ServiceAccount with the token itself, bound to the same token Secret, and
// writes it into the hub Secret; one whose clock says they have not writes nothing and comes back
// when they have. A Secret changed since it was read is not overwritten. A member that refuses
// the renewal leaves the Secret as it is and reports the failure. The credential may request a
// token for its own ServiceAccount only.
func TestRenewerRenewsTheToken(t *testing.T) {
	g := NewWithT(t)
	const member = renewedMember
	opts := baseOptions(member)
	opts.TokenDuration = registration.MinTokenDuration
	register(t, opts)
	before := hubSecret(g, hubv1alpha1.DefaultSecretNamespace, member)
	_, kc := kubeconfigIn(g, before, hubv1alpha1.DefaultSecretKey)
	oldToken := tokenOf(g, kc)
	tokenSecrets := tokenSecretsOf(g, hubv1alpha1.DefaultSecretNamespace, member)
	g.Expect(tokenSecrets).To(HaveLen(1))

	// Not due: nothing is written; it comes back when 80% of the life has passed.
	r := renewer(hubAdmin, 0)
	res, err := renew(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(And(BeNumerically(">", 7*time.Minute), BeNumerically("<=", 8*time.Minute)))
	g.Expect(hubSecret(g, hubv1alpha1.DefaultSecretNamespace, member).ResourceVersion).To(Equal(before.ResourceVersion))
	state, ok := r.State(member)
	g.Expect(ok).To(BeTrue())
	g.Expect(state.Err).NotTo(HaveOccurred())

	// A Secret written between the renewer's read and its write (a `hub register`, say) wins.
	concurrent, err := client.New(hubCP.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	racing := interceptor.NewClient(hubAdmin, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		s := obj.(*corev1.Secret).DeepCopy()
		s.Annotations["test.renewal/concurrent"] = "written meanwhile"
		return concurrent.Update(ctx, s)
	}})
	_, err = renew(renewer(racing, 9*time.Minute))
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a conflict, got %v", err)
	raced := hubSecret(g, hubv1alpha1.DefaultSecretNamespace, member)
	g.Expect(raced.Annotations).To(HaveKey("test.renewal/concurrent"))
	_, kc = kubeconfigIn(g, raced, hubv1alpha1.DefaultSecretKey)
	g.Expect(tokenOf(g, kc)).To(Equal(oldToken), "the concurrent write is kept")

	// Due: a new token, bound to the same token Secret, that works, in the Secret on the hub.
	r = renewer(hubAdmin, 9*time.Minute)
	_, err = renew(r)
	g.Expect(err).NotTo(HaveOccurred())
	after := hubSecret(g, hubv1alpha1.DefaultSecretNamespace, member)
	raw, kc := kubeconfigIn(g, after, hubv1alpha1.DefaultSecretKey)
	newToken := tokenOf(g, kc)
	g.Expect(newToken).NotTo(Equal(oldToken))
	expectBoundTo(g, newToken, tokenSecrets[0])
	g.Expect(after.Annotations[registration.TokenExpiresAnnotation]).NotTo(BeEmpty())
	expires, err := time.Parse(time.RFC3339, after.Annotations[registration.TokenExpiresAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expires).To(BeTemporally("~", time.Now().Add(registration.MinTokenDuration), time.Minute))
	g.Expect(after.Labels).To(Equal(before.Labels), "only the token and its expiry change")
	hub := memberClientFor(g, raw)
	g.Expect(hub.Get(t.Context(), client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})).To(Succeed(), "the new token works")
	state, _ = r.State(member)
	g.Expect(state.Err).NotTo(HaveOccurred())
	g.Expect(state.Next).To(BeTemporally("~", expires.Add(-registration.MinTokenDuration/5), 2*time.Second), "the next renewal is the new token's")

	// Its own ServiceAccount only.
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "renewal-other"}}
	g.Expect(memberAdmin.Create(t.Context(), other)).To(Succeed())
	g.Expect(hub.SubResource("token").Create(t.Context(), other, &authenticationv1.TokenRequest{})).
		To(Satisfy(apierrors.IsForbidden), "a token for another ServiceAccount")

	// Refused: the Secret stays; the failure is reported, and retried (an error).
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.RenewalRoleName(member)}}
	g.Expect(memberAdmin.Delete(t.Context(), binding)).To(Succeed())
	g.Eventually(func() error {
		_, err := renew(r)
		return err
	}).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsForbidden))
	g.Expect(hubSecret(g, hubv1alpha1.DefaultSecretNamespace, member).ResourceVersion).To(Equal(after.ResourceVersion))
	state, _ = r.State(member)
	g.Expect(state.Err).To(Satisfy(apierrors.IsForbidden))
}
