package spokeprovider_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/sharding/election"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// fenceLease is the lease duration of the fence of TestCRDWritesWaitForTheFence.
const fenceLease = 3 * time.Second

var (
	ourRevision   = strconv.Itoa(hubv1alpha1.MemberCRDRevision)
	olderRevision = strconv.Itoa(hubv1alpha1.MemberCRDRevision - 1)
	newerRevision = strconv.Itoa(hubv1alpha1.MemberCRDRevision + 1)
)

// TestCRDWritesWaitForTheFence: while the replica's fence refuses (the leader's Lease not held),
// no CRD write reaches the member, neither when it joins nor while its CRD is older than the
// hub's and stripped; the member joins all the same. Once the fence lets writes leave, the hub
// upgrades the CRD, and every write of it came after.
func TestCRDWritesWaitForTheFence(t *testing.T) {
	g := NewWithT(t)
	t.Cleanup(func() { resetCRD(t, memberB) })
	setCRDRevision(g, memberB, olderRevision)
	stripCRD(g, memberB)
	stripped := liveCRD(g, memberB)

	ns := newHubNamespace(t)
	lock, err := election.NewLock(hub.Config, ns, "crd-fence", "crd-fence", election.Of(fenceLease), nil)
	g.Expect(err).NotTo(HaveOccurred())
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	opts.Replica = sharding.Replica{ID: "crd-fence"}.FencedBy(lock)
	g.Expect(opts.Replica.MayWrite("crd-fence")).To(BeFalse(), "the fence refuses: the Lease is not held")
	f := startProvider(t, opts)
	since := time.Now()
	f.createSecret("crd-fence", memberB.Kubeconfig())
	f.waitReady(g, "crd-fence")
	g.Consistently(hubCRDWrites(memberB, since)).WithTimeout(quietPeriod).WithPolling(100*time.Millisecond).Should(BeEmpty(),
		"no CRD write reaches the member while the fence refuses")
	g.Expect(liveCRD(g, memberB).ResourceVersion).To(Equal(stripped.ResourceVersion))

	allowed := time.Now()
	elect(t, lock)
	g.Eventually(func(g Gomega) {
		crd := liveCRD(g, memberB)
		g.Expect(crd.Annotations).To(HaveKeyWithValue(hubv1alpha1.CRDRevisionAnnotation, ourRevision))
		g.Expect(crd.Spec.Versions[0].Schema).To(Equal(memberCRDs[0].Spec.Versions[0].Schema))
	}).WithTimeout(crdTimeout).WithPolling(interval).Should(Succeed(), "the hub upgrades the CRD once its fence lets it")
	writes := hubCRDWrites(memberB, since)(g)
	g.Expect(writes).NotTo(BeEmpty())
	for _, w := range writes {
		g.Expect(w.At).To(BeTemporally(">=", allowed), "a CRD write before the fence let it: %+v", w)
	}
	g.Eventually(f.state("crd-fence")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
}

// TestOlderCRDRevisionIsUpgraded: a member's CRD of an older revision is upgraded to the hub's,
// when the member joins and again when it goes back to an older revision while connected: one
// write each, the hub's revision stamped on it; the member stays Connected.
func TestOlderCRDRevisionIsUpgraded(t *testing.T) {
	g := NewWithT(t)
	t.Cleanup(func() { resetCRD(t, memberB) })
	setCRDRevision(g, memberB, olderRevision)
	stripCRD(g, memberB)

	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	since := time.Now()
	f.createSecret("crd-older", memberB.Kubeconfig())
	f.waitReady(g, "crd-older")
	crd := liveCRD(g, memberB)
	g.Expect(crd.Annotations).To(HaveKeyWithValue(hubv1alpha1.CRDRevisionAnnotation, ourRevision), "upgraded when it joined")
	g.Expect(crd.Spec.Versions[0].Schema).To(Equal(memberCRDs[0].Spec.Versions[0].Schema))
	g.Expect(hubCRDWrites(memberB, since)(g)).To(HaveLen(1), "one write")

	since = time.Now()
	setCRDRevision(g, memberB, olderRevision)
	g.Eventually(func(g Gomega) map[string]string { return liveCRD(g, memberB).Annotations }).WithTimeout(crdTimeout).WithPolling(interval).
		Should(HaveKeyWithValue(hubv1alpha1.CRDRevisionAnnotation, ourRevision), "upgraded while connected")
	g.Consistently(hubCRDWrites(memberB, since)).WithTimeout(quietPeriod).WithPolling(100*time.Millisecond).Should(HaveLen(1), "one write")
	g.Expect(f.state("crd-older")()).To(beReady(hubv1alpha1.ConnectedReason))
}

// TestNewerCRDRevisionIsLeftAlone: a member's CRD of a higher revision than the hub's (a newer
// hub applied it, its schema other than this hub's) is left alone, on join and while connected:
// no write, and the member is Ready with reason CRDNewer, its message naming the CRD and both
// revisions. Once the CRD is of the hub's revision again, the hub restores it and the member is
// Connected.
func TestNewerCRDRevisionIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	t.Cleanup(func() { resetCRD(t, memberB) })
	setCRDRevision(g, memberB, newerRevision)
	stripCRD(g, memberB)
	newer := liveCRD(g, memberB)

	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	f := startProvider(t, opts)
	since := time.Now()
	f.createSecret("crd-newer", memberB.Kubeconfig())
	g.Eventually(f.state("crd-newer")).WithTimeout(joinTimeout).WithPolling(interval).Should(And(beReady(hubv1alpha1.CRDNewerReason),
		HaveField("Message", And(ContainSubstring(memberCRDs[0].Name), ContainSubstring("revision "+newerRevision),
			ContainSubstring("this hub's "+ourRevision)))))
	t.Logf("said: %s", f.state("crd-newer")().Message)
	g.Consistently(hubCRDWrites(memberB, since)).WithTimeout(quietPeriod).WithPolling(100*time.Millisecond).Should(BeEmpty(),
		"the newer CRD is left alone")
	g.Expect(liveCRD(g, memberB).ResourceVersion).To(Equal(newer.ResourceVersion))
	g.Expect(f.state("crd-newer")()).To(beReady(hubv1alpha1.CRDNewerReason))

	setCRDRevision(g, memberB, ourRevision)
	g.Eventually(func(g Gomega) *apiextensionsv1.CustomResourceValidation {
		return liveCRD(g, memberB).Spec.Versions[0].Schema
	}).
		WithTimeout(crdTimeout).WithPolling(interval).Should(Equal(memberCRDs[0].Spec.Versions[0].Schema), "restored at the hub's revision")
	g.Eventually(f.state("crd-newer")).WithTimeout(crdTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
}

// TestCRDCreateOnJoinNeverReplaces: the create a replica may send unfenced when it joins a
// member creates a CRD the member does not have, stamped with the hub's revision, and leaves one
// it has as it is, whatever its revision or content. Joining a member without the ConfigBundle
// CRD while the fence refuses creates it (the one unfenced write), and nothing else.
func TestCRDCreateOnJoinNeverReplaces(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	cs, err := apiextensionsclient.NewForConfig(memberB.Config)
	g.Expect(err).NotTo(HaveOccurred())
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	t.Cleanup(func() { resetCRD(t, memberB) })

	// An existing CRD, older and stripped: left as it is.
	setCRDRevision(g, memberB, olderRevision)
	stripCRD(g, memberB)
	existing := liveCRD(g, memberB)
	out, err := spokeprovider.CreateCRD(ctx, cs, memberCRDs[0], hubv1alpha1.FieldOwner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(BeNil(), "someone else made it")
	g.Expect(liveCRD(g, memberB).ResourceVersion).To(Equal(existing.ResourceVersion), "never replaced")

	// A CRD the member does not have: created, stamped.
	other := otherCRD()
	t.Cleanup(func() { _ = crds.Delete(ctx, other.Name, metav1.DeleteOptions{}) })
	out, err = spokeprovider.CreateCRD(ctx, cs, other, hubv1alpha1.FieldOwner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).NotTo(BeNil())
	g.Expect(out.Annotations).To(HaveKeyWithValue(hubv1alpha1.CRDRevisionAnnotation, ourRevision))
	created := out
	changed := other.DeepCopy()
	changed.Spec.Versions[0].Name = "v2"
	out, err = spokeprovider.CreateCRD(ctx, cs, changed, hubv1alpha1.FieldOwner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(BeNil(), "created once")
	live, err := crds.Get(ctx, other.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// Its status, which the API server writes, may have changed since; its spec has not.
	g.Expect(live.UID).To(Equal(created.UID))
	g.Expect(live.Generation).To(Equal(created.Generation))
	g.Expect(live.Spec.Versions[0].Name).To(Equal("v1"))

	// Joining a member without the CRD while the fence refuses: the CRD is created, and no other
	// write follows.
	resetCRD(t, memberB)
	deleteCRD(g, memberB)
	g.Eventually(func(g Gomega) bool { return crdUID(g, memberB) == "" && !crdExists(g, memberB) }).
		WithTimeout(crdTimeout).WithPolling(interval).Should(BeTrue())
	lock, err := election.NewLock(hub.Config, newHubNamespace(t), "crd-join", "crd-join", election.Of(fenceLease), nil)
	g.Expect(err).NotTo(HaveOccurred())
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true
	opts.Replica = sharding.Replica{ID: "crd-join"}.FencedBy(lock)
	f := startProvider(t, opts)
	since := time.Now()
	f.createSecret("crd-join", memberB.Kubeconfig())
	f.waitReady(g, "crd-join")
	g.Expect(liveCRD(g, memberB).Annotations).To(HaveKeyWithValue(hubv1alpha1.CRDRevisionAnnotation, ourRevision))
	g.Consistently(hubCRDWrites(memberB, since)).WithTimeout(quietPeriod).WithPolling(100*time.Millisecond).Should(
		ConsistOf(HaveField("Verb", "patch")), "the create on join, and nothing else while the fence refuses")
}

// hubCRDWrites polls the writes of the hub to the ConfigBundle CRD that cp served since then,
// from its audit log.
func hubCRDWrites(cp *controlplane.ControlPlane, since time.Time) func(Gomega) []controlplane.Write {
	return func(g Gomega) []controlplane.Write {
		all, err := cp.Writes()
		g.Expect(err).NotTo(HaveOccurred())
		var out []controlplane.Write
		for _, w := range all {
			if w.Resource == "customresourcedefinitions" && w.Name == memberCRDs[0].Name && strings.HasPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix) &&
				!w.At.Before(since) {
				out = append(out, w)
			}
		}
		return out
	}
}

// setCRDRevision sets the revision annotation of a member's ConfigBundle CRD; "" removes it.
func setCRDRevision(g Gomega, cp *controlplane.ControlPlane, rev string) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := liveCRD(g, cp)
		if rev == "" {
			delete(crd.Annotations, hubv1alpha1.CRDRevisionAnnotation)
		} else {
			if crd.Annotations == nil {
				crd.Annotations = map[string]string{}
			}
			crd.Annotations[hubv1alpha1.CRDRevisionAnnotation] = rev
		}
		return crdClient(g, cp).Update(context.Background(), crd)
	})).To(Succeed())
}

// resetCRD restores a member's ConfigBundle CRD (restoreCRD) and removes its revision, as the
// suite installed it.
func resetCRD(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	restoreCRD(t, cp)
	setCRDRevision(NewWithT(t), cp, "")
}

// crdExists reports whether a member has the ConfigBundle CRD, even one being deleted.
func crdExists(g Gomega, cp *controlplane.ControlPlane) bool {
	err := crdClient(g, cp).Get(context.Background(), client.ObjectKey{Name: memberCRDs[0].Name}, &apiextensionsv1.CustomResourceDefinition{})
	return err == nil
}

// otherCRD is a CRD of a group of its own, which no member has.
func otherCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.crd-create.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "crd-create.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
}

// elect has lock acquire its Lease on the hub, and keep it until the test ends: the fence of a
// replica FencedBy it lets writes leave from then on.
func elect(t *testing.T, lock *election.Lock) {
	t.Helper()
	tm := election.Of(fenceLease)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: tm.LeaseDuration, RenewDeadline: tm.RenewDeadline, RetryPeriod: tm.RetryPeriod, ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { le.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}
