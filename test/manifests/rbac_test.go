package manifests

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/registration"
	"configbundle.dev/hub/pkg/version"
)

// replicaID is the --replica-id of the hub the test runs.
const replicaID = "manifests-hub"

// tokenLifetime is the lifetime asked of the hub ServiceAccount's token: the test's length, with
// room to spare.
const tokenLifetime = time.Hour

// syncBuffer is a bytes.Buffer safe for the hub's concurrent loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serviceAccountConfig returns a client config for the hub cluster that authenticates with a
// fresh token of the ServiceAccount configbundle-hub and nothing else: no client certificate,
// no basic auth, only the CA to trust the server.
func serviceAccountConfig(t *testing.T, admin *rest.Config) *rest.Config {
	t.Helper()
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(admin)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), hubName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr.Status.Token).NotTo(BeEmpty())

	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	g.Expect(cfg.CAData).NotTo(BeEmpty())
	g.Expect(cfg.CertData).To(BeEmpty())
	g.Expect(cfg.KeyData).To(BeEmpty())
	g.Expect(cfg.CertFile).To(BeEmpty())
	g.Expect(cfg.KeyFile).To(BeEmpty())
	g.Expect(cfg.Username).To(BeEmpty())
	g.Expect(cfg.Password).To(BeEmpty())
	g.Expect(cfg.BearerTokenFile).To(BeEmpty())
	g.Expect(cfg.ExecProvider).To(BeNil())
	g.Expect(cfg.AuthProvider).To(BeNil())
	return cfg
}

// TestHubRunsWithItsServiceAccount installs config/default (but the Deployment: there is no
// image here) on a hub cluster, runs the hub in-process with nothing but a token of the
// ServiceAccount it grants, and checks that the hub does all its work with those rights and that
// the rights go no further.
func TestHubRunsWithItsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	hubCP, m1 := controlPlane(t, "hub"), controlPlane(t, "m1")
	admin, memberAdmin := adminClient(t, hubCP), adminClient(t, m1)
	ctx := t.Context()

	objs := render(t, "default")
	installPrerequisites(t, admin, objs)
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			g.Expect(apply(ctx, admin, u)).To(Succeed(), id(u))
		}
	}

	saCfg := serviceAccountConfig(t, hubCP.Config)
	sa := newClient(t, saCfg)
	// The authorizer learns of new bindings through informers: wait until it knows both, so
	// that the hub's first requests are not refused (which the log check below would flag).
	g.Eventually(func(g Gomega) {
		g.Expect(sa.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace))).To(Succeed())
		g.Expect(sa.List(ctx, &hubv1alpha1.MemberClusterList{})).To(Succeed())
	}).WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed())

	logs := &syncBuffer{}
	logger := zap.New(zap.WriteTo(logs), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's leader election and event broadcaster log through klog
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hub log:\n%s", logs.String())
		}
	})

	hub, err := hubmanager.New(saCfg, hubmanager.Options{LeaderElect: true, ProbeInterval: time.Second, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		ReplicaID: replicaID})
	g.Expect(err).NotTo(HaveOccurred())
	hubCtx, stopHub := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hub.Start(hubCtx) }()
	t.Cleanup(func() {
		stopHub()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("the hub stopped with: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("the hub did not stop within %s", stopTimeout)
		}
	})

	regCtx, cancelReg := context.WithTimeout(ctx, registerTimeout)
	defer cancelReg()
	reg, err := registration.Register(regCtx, registration.Options{Name: "m1", Member: m1.Config, Hub: hubCP.Config})
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("the member joins", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) string {
			mc := &hubv1alpha1.MemberCluster{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: "m1"}, mc)).To(Succeed())
			c := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			return string(c.Status) + "/" + c.Reason
		}).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal("True/" + hubv1alpha1.ConnectedReason))
	})

	t.Run("the Fleet counts it", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) int64 {
			f := &hubv1alpha1.Fleet{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
			return f.Status.Clusters.Total
		}).WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(1))
	})

	t.Run("a ConfigBundle in the member gets its ConfigMap", func(t *testing.T) {
		g := NewWithT(t)
		bundle := &configbundlev1alpha1.ConfigBundle{
			ObjectMeta: metav1.ObjectMeta{Name: "manifests-check", Namespace: metav1.NamespaceDefault},
			Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: "reconciled by a hub on least privilege"},
		}
		g.Expect(memberAdmin.Create(ctx, bundle)).To(Succeed())
		g.Eventually(func(g Gomega) map[string]string {
			cm := &corev1.ConfigMap{}
			g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(bundle), cm)).To(Succeed())
			return cm.Data
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{configbundlev1alpha1.MessageKey: bundle.Spec.Message}))
	})

	t.Run("a FleetBundle is placed, and released once deleted", func(t *testing.T) {
		g := NewWithT(t)
		set, binding, err := config.SampleClusterSet() // ClusterSet global, bound into default
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(admin.Create(ctx, set)).To(Succeed())
		g.Expect(admin.Create(ctx, binding)).To(Succeed())
		fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Name: "manifests-placed", Namespace: metav1.NamespaceDefault},
			Spec: hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{},
				Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "placed by a hub on least privilege"}}}}
		g.Expect(admin.Create(ctx, fb)).To(Succeed())
		g.Eventually(func(g Gomega) string {
			b := &configbundlev1alpha1.ConfigBundle{}
			g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(fb), b)).To(Succeed())
			return b.Spec.Message
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(fb.Spec.Template.Spec.Message))
		g.Eventually(func(g Gomega) string { // the status, and the binding's, written by the hub
			b := &hubv1alpha1.ClusterSetBinding{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(binding), b)).To(Succeed())
			c := meta.FindStatusCondition(b.Status.Conditions, hubv1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.ClusterSetBoundReason))
		// Deleting it removes the placed bundle, then the hub patches its finalizer away.
		g.Expect(admin.Delete(ctx, fb)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{}))
		}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the FleetBundle is released")
		g.Eventually(func() bool {
			return apierrors.IsNotFound(memberAdmin.Get(ctx, client.ObjectKeyFromObject(fb), &configbundlev1alpha1.ConfigBundle{}))
		}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the placed bundle is removed")
	})

	t.Run("leader election holds the Lease and records its Event", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) string {
			lease := &coordinationv1.Lease{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: hubName}, lease)).To(Succeed())
			return ptr.Deref(lease.Spec.HolderIdentity, "")
		}).WithTimeout(timeout).WithPolling(interval).ShouldNot(BeEmpty())
		g.Eventually(func(g Gomega) []corev1.Event {
			events := &corev1.EventList{}
			g.Expect(admin.List(ctx, events, client.InNamespace(namespace))).To(Succeed())
			return events.Items
		}).WithTimeout(timeout).WithPolling(interval).Should(ContainElement(And(
			HaveField("InvolvedObject.Kind", "Lease"),
			HaveField("InvolvedObject.Name", hubName),
			HaveField("Reason", "LeaderElection"),
		)))
	})

	// Every request the hub made so far was allowed: a rule missing from the generated role shows
	// up here even where the hub retries around it.
	t.Run("the hub was refused nothing", func(t *testing.T) {
		var refused []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				refused = append(refused, line)
			}
		}
		NewWithT(t).Expect(refused).To(BeEmpty())
	})

	// Every write the hub made so far, to the hub cluster and to the member, as their audit logs
	// record them, names the hub, its version and its replica: every client it builds carries it.
	t.Run("the hub's writes carry its user agent", func(t *testing.T) {
		g := NewWithT(t)
		want := version.UserAgent(replicaID)
		g.Expect(want).To(HavePrefix(hubv1alpha1.UserAgentPrefix))
		g.Expect(want).To(HaveSuffix(" (" + replicaID + ")"))
		memberNamespace, memberSA, _ := strings.Cut(reg.ServiceAccount, "/")
		for _, tc := range []struct {
			plane *controlplane.ControlPlane
			user  string
		}{
			{hubCP, "system:serviceaccount:" + namespace + ":" + hubName},
			{m1, "system:serviceaccount:" + memberNamespace + ":" + memberSA},
		} {
			writes, err := tc.plane.Writes()
			g.Expect(err).NotTo(HaveOccurred())
			agents := map[string]int{}
			for _, w := range writes {
				if w.User == tc.user {
					agents[w.UserAgent]++
				}
			}
			g.Expect(agents).To(And(HaveLen(1), HaveKey(want)), "the user agents of the writes of %s to %s", tc.user, tc.plane.Name)
		}
	})

	t.Run("least privilege", func(t *testing.T) {
		g := NewWithT(t)
		forbidden := func(err error) bool { return apierrors.IsForbidden(err) }

		// Direct attempts with the hub's own token.
		// It reads Secrets everywhere (FleetBundle sources: its cache holds the labelled ones
		// alone, which RBAC cannot say) and creates its snapshots, but changes none.
		other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-for-the-hub", Namespace: metav1.NamespaceDefault}}
		g.Expect(admin.Create(ctx, other)).To(Succeed())
		g.Expect(sa.Update(ctx, other.DeepCopy(), client.DryRunAll)).To(MatchError(forbidden, "IsForbidden"), "update a Secret in another namespace")
		g.Expect(sa.Delete(ctx, other.DeepCopy(), client.DryRunAll)).To(MatchError(forbidden, "IsForbidden"), "delete a Secret in another namespace")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "not-by-the-hub", Namespace: namespace},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}},
		}
		g.Expect(sa.Create(ctx, pod, client.DryRunAll)).To(MatchError(forbidden, "IsForbidden"), "create a pod")
		// It reads the members' credentials and updates them (it renews their tokens), but may
		// neither create nor delete one.
		m1Secret := &corev1.Secret{}
		g.Expect(sa.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "m1"}, m1Secret)).To(Succeed())
		m1Secret.Labels["renewed"] = "true"
		g.Expect(sa.Update(ctx, m1Secret, client.DryRunAll)).To(Succeed(), "update a member's Secret")
		g.Expect(sa.Delete(ctx, m1Secret, client.DryRunAll)).To(MatchError(forbidden, "IsForbidden"), "delete a member's Secret")

		// The same questions, and a few more, to the authorizer, asked as the hub.
		cs, err := kubernetes.NewForConfig(saCfg)
		g.Expect(err).NotTo(HaveOccurred())
		can := func(attrs authorizationv1.ResourceAttributes) bool {
			r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
			}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return r.Status.Allowed
		}
		for _, tc := range []struct {
			attrs authorizationv1.ResourceAttributes
			want  bool
		}{
			// Controls: what the hub needs is allowed.
			{authorizationv1.ResourceAttributes{Verb: "watch", Resource: "secrets", Namespace: namespace}, true},
			{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: namespace}, true},
			{authorizationv1.ResourceAttributes{Verb: "patch", Group: "hub.configbundle.dev", Resource: "memberclusters", Subresource: "status"}, true},
			// Secrets everywhere: read (sources), and created (snapshots), never changed or deleted.
			{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: metav1.NamespaceDefault}, true},
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: metav1.NamespaceDefault}, true},
			{authorizationv1.ResourceAttributes{Verb: "update", Resource: "secrets", Namespace: metav1.NamespaceDefault}, false},
			{authorizationv1.ResourceAttributes{Verb: "patch", Resource: "secrets", Namespace: namespace}, false},
			{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "secrets", Namespace: namespace}, false},
			// Workloads, and granting itself more.
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: namespace}, false},
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: metav1.NamespaceDefault}, false},
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: namespace}, false},
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: namespace}, false},
			// It reads ConfigMaps (its cache holds only the FleetBundles' labelled sources), never
			// writes one: the member-side rules stay in the members.
			{authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps", Namespace: namespace}, true},
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: namespace}, false},
			{authorizationv1.ResourceAttributes{Verb: "update", Resource: "configmaps", Namespace: metav1.NamespaceDefault}, false},
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
			// The tenancy model: it reads the sets and their bindings, writes their status, and
			// never binds a set, nor pauses or relabels a member.
			{authorizationv1.ResourceAttributes{Verb: "list", Group: "hub.configbundle.dev", Resource: "clustersets"}, true},
			{authorizationv1.ResourceAttributes{Verb: "watch", Group: "hub.configbundle.dev", Resource: "clustersetbindings"}, true},
			{authorizationv1.ResourceAttributes{Verb: "patch", Group: "hub.configbundle.dev", Resource: "clustersetbindings", Subresource: "status", Namespace: metav1.NamespaceDefault}, true},
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "hub.configbundle.dev", Resource: "clustersets", Subresource: "bind", Name: "global"}, false},
			{authorizationv1.ResourceAttributes{Verb: "create", Group: "hub.configbundle.dev", Resource: "clustersetbindings", Namespace: metav1.NamespaceDefault}, false},
			{authorizationv1.ResourceAttributes{Verb: "update", Group: "hub.configbundle.dev", Resource: "clustersets"}, false},
			{authorizationv1.ResourceAttributes{Verb: "patch", Group: "hub.configbundle.dev", Resource: "memberclusters"}, false},
			// Leases and Events of other namespaces.
			{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: metav1.NamespaceSystem}, false},
			{authorizationv1.ResourceAttributes{Verb: "create", Resource: "events", Namespace: metav1.NamespaceDefault}, false},
		} {
			g.Expect(can(tc.attrs)).To(Equal(tc.want), "%s %s/%s/%s in %q", tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource, tc.attrs.Subresource, tc.attrs.Namespace)
		}
	})

}
