package spokeprovider_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	hubconfig "configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/netproxy"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// crdTimeout bounds noticing a deleted CRD and bringing it back: a few probes.
const crdTimeout = 15 * time.Second

// TestFaultCRDDeletedIsReinstalled: with InstallCRDs, a ConfigBundle CRD deleted from a connected
// member makes it CRDMissing at once (its watch, not the next probe, sees it), with a Warning
// Event on its MemberCluster; the hub installs the CRD again, and the member is Ready again,
// its bundles resynced.
func TestFaultCRDDeletedIsReinstalled(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.ProbeInterval = time.Hour // the watch, not a probe, notices
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	f.createSecret("crd-back", memberB.Kubeconfig())
	f.waitReady(g, "crd-back")
	uid := crdUID(g, memberB)
	readies := len(f.history.readiesOf("crd-back"))
	t.Cleanup(func() { restoreCRD(t, memberB) })

	deleted := time.Now()
	deleteCRD(g, memberB)
	g.Eventually(func() []observation { return f.history.changesOf("crd-back") }).WithTimeout(crdTimeout).WithPolling(interval).
		Should(ContainElement(HaveField("State", beNotReady(hubv1alpha1.CRDMissingReason))), "the member says its CRD is missing")
	for _, o := range f.history.changesOf("crd-back") {
		if o.State.Reason == hubv1alpha1.CRDMissingReason {
			t.Logf("CRDMissing %v after the CRD's deletion: %s", o.At.Sub(deleted).Round(time.Millisecond), o.State.Message)
			g.Expect(o.State.Message).To(ContainSubstring(memberCRDs[0].Name))
			break
		}
	}
	g.Eventually(memberEvents("crd-back", hubv1alpha1.CRDDeletedEvent)).WithTimeout(crdTimeout).WithPolling(interval).
		Should(ConsistOf(HaveField("Type", corev1.EventTypeWarning)))
	g.Eventually(func(g Gomega) types.UID { return crdUID(g, memberB) }).WithTimeout(crdTimeout).WithPolling(interval).
		ShouldNot(Or(BeEmpty(), Equal(uid)), "the hub installs the CRD again")
	g.Eventually(f.state("crd-back")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
	t.Logf("CRD reinstalled and the member Ready %v after the CRD's deletion", time.Since(deleted).Round(time.Millisecond))
	g.Expect(f.history.readiesOf("crd-back")).To(HaveLen(readies+1), "its bundles are resynced")
}

// TestFaultCRDSchemaStrippedIsRestored: a member's ConfigBundle CRD whose schema was
// stripped is applied again at once, with a CRDRestored Event on its MemberCluster, in one write;
// the member stays Ready, and a message over the limit is refused again.
func TestFaultCRDSchemaStrippedIsRestored(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	opts := testOptions()
	opts.ProbeInterval = time.Hour // the watch, not a probe, notices
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	f.createSecret("crd-strip", memberB.Kubeconfig())
	f.waitReady(g, "crd-strip")
	t.Cleanup(func() { restoreCRD(t, memberB) })
	readiness := f.watchReadiness("crd-strip")

	stripped := stripCRD(g, memberB)
	at := time.Now()
	g.Eventually(func(g Gomega) *apiextensionsv1.CustomResourceValidation {
		return liveCRD(g, memberB).Spec.Versions[0].Schema
	}).
		WithTimeout(crdTimeout).WithPolling(interval).Should(Equal(memberCRDs[0].Spec.Versions[0].Schema), "the hub restores the schema")
	t.Logf("schema restored %v after it was stripped", time.Since(at).Round(time.Millisecond))
	g.Eventually(memberEvents("crd-strip", hubv1alpha1.CRDRestoredEvent)).WithTimeout(crdTimeout).WithPolling(interval).
		Should(ConsistOf(And(HaveField("Type", corev1.EventTypeNormal), HaveField("Note", ContainSubstring("schema")))))
	restored := liveCRD(g, memberB)
	g.Expect(restored.Generation).To(Equal(stripped.Generation+1), "one write")
	g.Consistently(func(g Gomega) string { return liveCRD(g, memberB).ResourceVersion }).WithTimeout(quietPeriod).WithPolling(100*time.Millisecond).
		Should(Equal(restored.ResourceVersion), "no write once restored")
	g.Expect(readiness()).To(BeEmpty(), "the member stays Ready")

	big := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "configbundle.dev/v1alpha1", "kind": "ConfigBundle",
		"metadata": map[string]any{"namespace": "default", "name": "too-big"},
		"spec":     map[string]any{"message": strings.Repeat("x", 1400*1024)},
	}}
	err := memberClients[memberB].Create(ctx, big)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a 1.4 MiB message is refused: %v", err)
}

// TestFaultCRDRestoredWhileHubHangs: while the hub cluster does not answer, a member's CRD is
// restored again and again, by one worker: recording the CRDRestored Event, which cannot reach
// the hub, holds it up for no longer than a moment.
func TestFaultCRDRestoredWhileHubHangs(t *testing.T) {
	g := NewWithT(t)
	proxy, err := netproxy.Start(hub.Host())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(proxy.Close()).To(Succeed()) })
	hubConfig := rest.CopyConfig(hub.Config)
	hubConfig.Host = "https://" + proxy.Addr() // the hub's serving certificate is for 127.0.0.1
	opts := testOptions()
	opts.ProbeInterval = time.Hour // the watch, not a probe, notices
	opts.CRDs, opts.InstallCRDs, opts.MaxConcurrentReconciles = memberCRDs, true, 1
	f := startProviderOn(t, opts, hubConfig)
	f.createSecret("crd-hang", memberB.Kubeconfig())
	f.waitReady(g, "crd-hang")
	t.Cleanup(func() { restoreCRD(t, memberB) })

	proxy.Partition()
	t.Cleanup(proxy.Heal)
	for i := range 2 {
		stripCRD(g, memberB)
		g.Eventually(func(g Gomega) *apiextensionsv1.CustomResourceValidation {
			return liveCRD(g, memberB).Spec.Versions[0].Schema
		}).WithTimeout(crdTimeout).WithPolling(interval).Should(Equal(memberCRDs[0].Spec.Versions[0].Schema),
			"strip %d: the hub restores the schema while its own cluster hangs", i+1)
	}
}

// TestCRDTheHubMayNotRestoreIsSaid: where the hub's credential may watch the CRD but not patch
// it, a stripped schema is said in the member's Ready message, naming the CRD and the right.
func TestCRDTheHubMayNotRestoreIsSaid(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	f.createSecret("crd-readonly", crdUserKubeconfig(t, memberB, "crd-readonly", "get", "list", "watch"))
	f.waitReady(g, "crd-readonly")
	t.Cleanup(func() { restoreCRD(t, memberB) })

	stripCRD(g, memberB)
	g.Eventually(f.state("crd-readonly")).WithTimeout(crdTimeout).WithPolling(interval).Should(And(beReady(hubv1alpha1.ConnectedReason),
		HaveField("Message", And(ContainSubstring(memberCRDs[0].Name), ContainSubstring("could not restore"), ContainSubstring("patch")))))
	t.Logf("said: %s", f.state("crd-readonly")().Message)
	g.Expect(memberEvents("crd-readonly", hubv1alpha1.CRDRestoredEvent)(g)).To(BeEmpty())

	restoreCRD(t, memberB)
	g.Eventually(f.state("crd-readonly")).WithTimeout(crdTimeout).WithPolling(interval).Should(HaveField("Message", Not(ContainSubstring("could not restore"))),
		"the note goes with the drift")
}

// TestCRDTheHubMayNotWriteIsSaid: a member whose hub credential may read and watch the CRD but
// not write it, and which serves the hub's CRD, is Ready, its message saying that the hub could
// not apply the CRD, naming it and the rights it needs.
func TestCRDTheHubMayNotWriteIsSaid(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	resetCRD(t, memberB) // of no revision: the hub upgrades it when it joins, or tries to
	f.createSecret("crd-nowrite", crdUserKubeconfig(t, memberB, "crd-nowrite", "get", "list", "watch"))
	f.waitReady(g, "crd-nowrite")
	g.Eventually(f.state("crd-nowrite")).WithTimeout(crdTimeout).WithPolling(interval).Should(And(beReady(hubv1alpha1.ConnectedReason),
		HaveField("Message", And(ContainSubstring("could not apply its CRD "+memberCRDs[0].Name), ContainSubstring("patch")))))
	t.Logf("said: %s", f.state("crd-nowrite")().Message)
	g.Consistently(f.state("crd-nowrite")).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("Message", ContainSubstring("could not apply")),
		"the watch's verdict, which finds no drift, keeps saying it")
}

// TestCRDWhoseNamesAreRejectedIsSaid: a member's CRD deleted and created again while another
// CRD took its kind is not established: the member is CRDMissing, its message saying that the
// member rejects the CRD's names and why; once the other CRD is gone, it is Ready again.
func TestCRDWhoseNamesAreRejectedIsSaid(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	opts := testOptions()
	opts.CRDs = memberCRDs
	f := startProvider(t, opts)
	f.createSecret("crd-names", memberB.Kubeconfig())
	f.waitReady(g, "crd-names")
	t.Cleanup(func() { restoreCRD(t, memberB) })

	deleteCRD(g, memberB)
	c := crdClient(g, memberB)
	// Gone, not only being deleted (crdUID's empty): a CRD being deleted cannot be created again.
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Name: memberCRDs[0].Name}, &apiextensionsv1.CustomResourceDefinition{})
	}).WithTimeout(crdTimeout).WithPolling(interval).Should(Satisfy(apierrors.IsNotFound))
	other := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "configbundlealiases." + memberCRDs[0].Spec.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: memberCRDs[0].Spec.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "configbundlealiases", Singular: "configbundlealias",
				Kind: memberCRDs[0].Spec.Names.Kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	g.Expect(c.Create(ctx, other)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(ctx, other) })
	crd := memberCRDs[0].DeepCopy()
	crd.ResourceVersion, crd.UID = "", ""
	g.Expect(c.Create(ctx, crd)).To(Succeed())
	g.Eventually(f.state("crd-names")).WithTimeout(crdTimeout).WithPolling(interval).Should(And(beNotReady(hubv1alpha1.CRDMissingReason),
		HaveField("Message", And(ContainSubstring("names rejected"), ContainSubstring("KindConflict"), Not(ContainSubstring("reinstalls"))))))
	t.Logf("said: %s", f.state("crd-names")().Message)

	g.Expect(c.Delete(ctx, other)).To(Succeed())
	restoreCRD(t, memberB)
	g.Eventually(f.state("crd-names")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
}

// TestFaultCRDDeletedIsReported: without InstallCRDs, a CRD deleted from a connected member makes
// it not Ready (CRDMissing) at once, once, probes or not; restoring it makes the member Ready
// again.
func TestFaultCRDDeletedIsReported(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.CRDs = memberCRDs
	f := startProvider(t, opts)
	f.createSecret("crd-gone", memberB.Kubeconfig())
	f.waitReady(g, "crd-gone")
	t.Cleanup(func() { restoreCRD(t, memberB) })
	readies := len(f.history.readiesOf("crd-gone"))

	deleted := time.Now()
	deleteCRD(g, memberB)
	g.Eventually(f.state("crd-gone")).WithTimeout(crdTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.CRDMissingReason))
	t.Logf("CRDMissing reported %v after the CRD's deletion (probe interval %v)", time.Since(deleted).Round(time.Millisecond), probeInterval)
	g.Expect(f.provider.Connected(multicluster.ClusterName("crd-gone"))).To(MatchError(spokeprovider.ErrNotConnected))
	g.Expect(f.state("crd-gone")().Message).To(ContainSubstring("--install-crds=false"))
	missing := func() int {
		n := 0
		for _, o := range f.history.changesOf("crd-gone") {
			if o.State.Reason == hubv1alpha1.CRDMissingReason {
				n++
			}
		}
		return n
	}
	g.Eventually(missing).WithTimeout(crdTimeout).WithPolling(interval).Should(Equal(1))
	g.Consistently(missing).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(1), "said once")

	restoreCRD(t, memberB)
	restored := time.Now()
	g.Eventually(f.state("crd-gone")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
	t.Logf("Ready again %v after the CRD was restored", time.Since(restored).Round(time.Millisecond))
	g.Eventually(func() int { return len(f.history.readiesOf("crd-gone")) }).WithTimeout(crdTimeout).WithPolling(interval).
		Should(Equal(readies+1), "its bundles are resynced")
}

func crdClient(g Gomega, cp *controlplane.ControlPlane) client.Client {
	scheme := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(rest.CopyConfig(cp.Config), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// crdUID returns the uid of the ConfigBundle CRD in a member, or "" if there is none.
func crdUID(g Gomega, cp *controlplane.ControlPlane) types.UID {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := crdClient(g, cp).Get(context.Background(), client.ObjectKey{Name: memberCRDs[0].Name}, crd)
	if apierrors.IsNotFound(err) || !crd.DeletionTimestamp.IsZero() {
		return ""
	}
	g.Expect(err).NotTo(HaveOccurred())
	return crd.UID
}

// deleteCRD deletes the ConfigBundle CRD from a member and waits until it is gone.
func deleteCRD(g Gomega, cp *controlplane.ControlPlane) {
	c := crdClient(g, cp)
	g.Expect(c.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: memberCRDs[0].ObjectMeta})).To(Succeed())
}

// restoreCRD creates the ConfigBundle CRD in a member if it is missing, puts its spec back if it
// differs, and waits until served.
func restoreCRD(t *testing.T, cp *controlplane.ControlPlane) {
	g := NewWithT(t)
	c := crdClient(g, cp)
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, interval, crdTimeout, true, func(context.Context) (bool, error) {
		crd := memberCRDs[0].DeepCopy()
		crd.ResourceVersion, crd.UID = "", ""
		err := c.Create(ctx, crd)
		switch {
		case apierrors.IsAlreadyExists(err):
			existing := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), existing); err != nil {
				return false, nil
			}
			if !equality.Semantic.DeepEqual(existing.Spec.Versions, crd.Spec.Versions) {
				existing.Spec.Versions = crd.Spec.Versions
				_ = c.Update(ctx, existing)
				return false, nil
			}
			return existing.DeletionTimestamp.IsZero() && established(existing), nil
		case errors.Is(err, context.Canceled):
			return false, err
		}
		return false, nil
	})
	g.Expect(err).NotTo(HaveOccurred(), "restoring the CRD")
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// liveCRD reads the ConfigBundle CRD of a member.
// TestCRDTheHubMayNotWatchIsSaid: a member whose role predates the watch of the CRD (get, create
// and patch only) is Ready, its message saying that the hub cannot watch the CRD and how to
// grant it; the probes still see a deletion.
func TestCRDTheHubMayNotWatchIsSaid(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	f.createSecret("crd-nowatch", crdUserKubeconfig(t, memberB, "crd-nowatch", "get", "create", "patch"))
	f.waitReady(g, "crd-nowatch")
	g.Eventually(f.state("crd-nowatch")).WithTimeout(crdTimeout).WithPolling(interval).Should(And(beReady(hubv1alpha1.ConnectedReason),
		HaveField("Message", And(ContainSubstring("cannot watch its CRD "+memberCRDs[0].Name), ContainSubstring("register the member again")))))
	t.Logf("said: %s", f.state("crd-nowatch")().Message)
}

func liveCRD(g Gomega, cp *controlplane.ControlPlane) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(crdClient(g, cp).Get(context.Background(), client.ObjectKey{Name: memberCRDs[0].Name}, crd)).To(Succeed())
	return crd
}

// stripCRD replaces the schema of every version of a member's ConfigBundle CRD with one that
// accepts anything, as a careless member admin would, and returns the CRD stripped.
func stripCRD(g Gomega, cp *controlplane.ControlPlane) *apiextensionsv1.CustomResourceDefinition {
	var crd *apiextensionsv1.CustomResourceDefinition
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd = liveCRD(g, cp)
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptr.To(true)}}
		}
		return crdClient(g, cp).Update(context.Background(), crd)
	})).To(Succeed())
	return crd
}

// memberEvents polls the Events of reason recorded on a member's MemberCluster.
func memberEvents(member, reason string) func(Gomega) []eventsv1.Event {
	return func(g Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(hubClient.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "MemberCluster" && e.Regarding.Name == member && e.Reason == reason {
				out = append(out, e)
			}
		}
		return out
	}
}

// crdUserKubeconfig provisions a user of cp with the member ClusterRole whose CRD rule grants
// only verbs, and returns its kubeconfig.
func crdUserKubeconfig(t *testing.T, cp *controlplane.ControlPlane, user string, verbs ...string) []byte {
	t.Helper()
	g := NewWithT(t)
	role, err := hubconfig.MemberClusterRole()
	g.Expect(err).NotTo(HaveOccurred())
	role.Name = user
	for i, r := range role.Rules {
		if slices.Contains(r.APIGroups, apiextensionsv1.GroupName) {
			role.Rules[i].Verbs = verbs
		}
	}
	c := memberClients[cp]
	ctx := context.Background()
	g.Expect(c.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	g.Expect(c.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = c.Delete(ctx, binding)
		_ = c.Delete(ctx, role)
	})
	cfg, err := cp.AddUser(user, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kc, err := controlplane.KubeconfigFor(cp.Name, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return kc
}
