package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestCredentialLifecycle: an expiring credential is reported on its own condition, with its
// expiry, a metric and an Event; a revoked one makes the member Forbidden at the first probe;
// registering again brings it back.
func TestCredentialLifecycle(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m3")
	defer fl.MustRegister(t, "m3")

	// A ServiceAccount token of ten minutes, inside the 30-day warning window.
	token, revoke := shortLivedToken(g, "m3", 10*time.Minute)
	cfg := rest.CopyConfig(fl.Member("m3").Plane.Config)
	cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, token.Status.Token
	fl.MustPutSecret(g, "m3", map[string][]byte{"kubeconfig": fleet.KubeconfigFor(cfg)})
	g.Eventually(credentialsOf("m3")).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal("False/" + hubv1alpha1.ExpiresSoonReason))
	mc := fl.MemberCluster("m3")(g)
	g.Expect(mc).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), "an expiring credential is not an outage")
	g.Expect(mc.Status.CredentialsExpiry).NotTo(BeNil())
	g.Expect(mc.Status.CredentialsExpiry.Time).To(BeTemporally("~", token.Status.ExpirationTimestamp.Time, time.Second))
	g.Expect(fl.Metrics(g)).To(ContainSubstring(`configbundle_member_credentials_expiry_timestamp_seconds{cluster="m3"} ` +
		strconv.FormatFloat(float64(token.Status.ExpirationTimestamp.Unix()), 'g', -1, 64)))
	g.Eventually(fl.EventsOn("MemberCluster", "", "m3")).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", hubv1alpha1.ExpiresSoonReason))))

	// Revoked: once the member answers 401 (its API server trusts a token it checked for up to
	// 10 s more), the hub says Forbidden at the first probe that gets it, without first calling it
	// Unreachable.
	revoke()
	tokenClient, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(identify(tokenClient)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized))
	revoked := time.Now()
	var seen []string
	g.Eventually(func(g Gomega) string {
		c := meta.FindStatusCondition(fl.MemberCluster("m3")(g).Status.Conditions, hubv1alpha1.ReadyCondition)
		seen = append(seen, c.Reason)
		return c.Reason
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.ForbiddenReason))
	t.Logf("Forbidden %v after the member first refused the token (probe interval %v)", time.Since(revoked).Round(time.Millisecond), probeInterval)
	g.Expect(seen).NotTo(ContainElement(hubv1alpha1.UnreachableReason))
	g.Expect(time.Since(revoked)).To(BeNumerically("<", 2*probeInterval+time.Second), "at the first probe, not after two")
	g.Eventually(fl.EventsOn("MemberCluster", "", "m3")).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", hubv1alpha1.ForbiddenReason),
		HaveField("Note", ContainSubstring("Member m3")))))

	fl.MustRegister(t, "m3")
	g.Eventually(fl.MemberCluster("m3")).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	g.Eventually(credentialsOf("m3")).WithTimeout(timeout).WithPolling(interval).Should(Equal("True/" + hubv1alpha1.CredentialsValidReason))
	g.Eventually(fl.EventsOn("MemberCluster", "", "m3")).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeNormal), HaveField("Reason", hubv1alpha1.ConnectedReason))))
}

// TestHubStatusGatesOnFreshHealth: `hub status --max-age` passes while a hub keeps the Fleet
// fresh, and fails once no hub is watching, even though the last status said Ready.
func TestHubStatusGatesOnFreshHealth(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m1", "m2")
	status := func() (int, string) {
		code, stdout, stderr := hubCommand(t, "status", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--max-age", gateMaxAge.String())
		return code, stdout + stderr
	}
	g.Eventually(func() int { code, _ := status(); return code }).WithTimeout(timeout).WithPolling(time.Second).Should(BeZero())
	_, out := status()
	g.Expect(out).To(ContainSubstring("m1"))

	fl.StopHub(fleet.HubName, syscall.SIGKILL)
	defer func() { g.Expect(startHub()).To(Succeed()) }()
	g.Expect(fl.Fleet(g)).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.AllReadyReason), "the last status stays behind, green")
	g.Eventually(func() string {
		code, out := status()
		return fmt.Sprintf("%d %s", code, out)
	}).WithTimeout(gateMaxAge + timeout).WithPolling(time.Second).Should(And(HavePrefix("1 "), ContainSubstring("no hub is watching")))
}

// gateMaxAge is the --max-age of the gate test: a few of the suite's heartbeat intervals.
const gateMaxAge = 4 * heartbeatInterval

// credentialsOf returns the status and reason of a member's CredentialsValid condition.
func credentialsOf(name string) func(Gomega) string {
	return func(g Gomega) string {
		c := meta.FindStatusCondition(fl.MemberCluster(name)(g).Status.Conditions, hubv1alpha1.CredentialsValidCondition)
		if c == nil {
			return "no CredentialsValid condition"
		}
		return string(c.Status) + "/" + c.Reason
	}
}

// shortLivedToken creates, in a member, a ServiceAccount with cluster-admin rights and a token of
// the given lifetime for it; revoke deletes the ServiceAccount, which invalidates the token.
func shortLivedToken(g Gomega, member string, lifetime time.Duration) (token *authenticationv1.TokenRequest, revoke func()) {
	ctx, c := context.Background(), fl.Member(member).Client
	name := "short-lived-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()%100000))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	g.Expect(c.Create(ctx, sa)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	g.Expect(c.Create(ctx, binding)).To(Succeed())
	token = &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))}}
	g.Expect(c.SubResource("token").Create(ctx, sa, token)).To(Succeed())
	return token, func() {
		g.Expect(c.Delete(ctx, sa)).To(Succeed())
		g.Expect(c.Delete(ctx, binding)).To(Succeed())
	}
}
