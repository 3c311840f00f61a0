package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/fleet"
)

// keptMember is the member of TestFaultMemberCRDIsKept, and keptBundles its bundles.
const (
	keptMember  = "m3"
	keptBundles = 20
)

// TestFaultMemberCRDIsKept: the member's ConfigBundle CRD is the hub's to keep. Its
// schema stripped, the hub applies its own again at once (a CRDRestored Event on the
// MemberCluster) and a message over the limit is refused again; the CRD deleted, which deletes
// every bundle, the member is Ready=False CRDMissing with Warning Events (CRDDeleted, and the
// transition's CRDMissing), its counts drop to none, the hub reinstalls the CRD and the member
// is Ready again; every bundle created again then gets its ConfigMap right.
func TestFaultMemberCRDIsKept(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, keptMember)
	c, crds := fl.Member(keptMember).Client, crdClient(g)
	const ns = "crd-kept"
	ensureNamespace(g, keptMember, ns)
	t.Cleanup(func() { removeKeptBundles(t, ns) })
	createKeptBundles(g, ns, "before")
	g.Eventually(func(g Gomega) int64 { return fl.MemberCluster(keptMember)(g).Status.Bundles.Ready }).
		WithTimeout(timeout).WithPolling(interval).Should(BeNumerically(">=", keptBundles))
	want, err := config.MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())

	// Stripped: restored, said, and the member stays Ready.
	stripped := time.Now()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := crds.Get(ctx, client.ObjectKey{Name: configBundleCRD}, crd); err != nil {
			return err
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptr.To(true)}}
		}
		return crds.Update(ctx, crd)
	})).To(Succeed())
	g.Eventually(func(g Gomega) *apiextensionsv1.CustomResourceValidation {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(crds.Get(ctx, client.ObjectKey{Name: configBundleCRD}, crd)).To(Succeed())
		return crd.Spec.Versions[0].Schema
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal(want[0].Spec.Versions[0].Schema))
	t.Logf("stripped schema restored %v after the strip", time.Since(stripped).Round(time.Millisecond))
	mc := fl.MemberCluster(keptMember)(g)
	g.Eventually(memberClusterEvents(keptMember, hubv1alpha1.CRDRestoredEvent)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(And(HaveField("Type", corev1.EventTypeNormal), HaveField("Regarding.UID", mc.UID),
			HaveField("Note", ContainSubstring("schema")))))
	g.Expect(mc).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	big := fleet.NewBundle(ns, "too-big", strings.Repeat("x", 1400*1024))
	err = c.Create(ctx, big)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a 1.4 MiB message is refused again: %v", err)

	// Deleted: said at once, counted, reinstalled.
	deleted := time.Now()
	g.Expect(crds.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: configBundleCRD}})).To(Succeed())
	g.Eventually(memberClusterEvents(keptMember, hubv1alpha1.CRDDeletedEvent)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Regarding.UID", mc.UID))))
	g.Eventually(memberClusterEvents(keptMember, hubv1alpha1.CRDMissingReason)).WithTimeout(timeout).WithPolling(interval).
		Should(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring(configBundleCRD)))),
			"the MemberCluster was Ready=False CRDMissing")
	g.Eventually(fl.MemberCluster(keptMember)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), HaveField("Status.Bundles.Total", BeZero())))
	t.Logf("CRD deleted -> reinstalled, the member Ready again and counting no bundle %v later", time.Since(deleted).Round(time.Millisecond))

	// Every bundle created again gets its ConfigMap right, the stale ones included.
	recreated := time.Now()
	createKeptBundles(g, ns, "after")
	created := time.Now()
	for i := range keptBundles {
		b := fleet.NewBundle(ns, fmt.Sprintf("b%02d", i), "")
		g.Eventually(fl.Member(keptMember).Message(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal(fmt.Sprintf("after %d", i)))
	}
	g.Eventually(func(g Gomega) hubv1alpha1.BundleCounts { return fl.MemberCluster(keptMember)(g).Status.Bundles }).
		WithTimeout(timeout).WithPolling(interval).Should(And(HaveField("Total", BeNumerically(">=", keptBundles)), HaveField("Failed", BeZero())))
	t.Logf("%d bundles created again in %v: ConfigMaps right and counted %v after the last", keptBundles,
		created.Sub(recreated).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	list := &configbundlev1alpha1.ConfigBundleList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, b := range list.Items {
		g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)).To(BeTrue(), "bundle %s Ready", b.Name)
	}
}

// createKeptBundles creates the bundles of TestFaultMemberCRDIsKept, their messages prefixed.
func createKeptBundles(g Gomega, ns, prefix string) {
	for i := range keptBundles {
		b := fleet.NewBundle(ns, fmt.Sprintf("b%02d", i), fmt.Sprintf("%s %d", prefix, i))
		g.Eventually(func() error { return fl.Member(keptMember).Client.Create(context.Background(), b) }).
			WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}
}

// removeKeptBundles deletes the bundles of TestFaultMemberCRDIsKept and their ConfigMaps, and
// waits until the MemberCluster counts them no more: the tests that follow count keptMember's.
func removeKeptBundles(t *testing.T, ns string) {
	g, ctx, c := NewWithT(t), context.Background(), fl.Member(keptMember).Client
	g.Expect(c.DeleteAllOf(ctx, &configbundlev1alpha1.ConfigBundle{}, client.InNamespace(ns))).To(Succeed())
	g.Expect(c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns))).To(Succeed())
	g.Eventually(func(g Gomega) bool {
		all := &configbundlev1alpha1.ConfigBundleList{}
		g.Expect(c.List(ctx, all)).To(Succeed())
		return fl.MemberCluster(keptMember)(g).Status.Bundles.Total == int64(len(all.Items))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the MemberCluster counts the bundles left")
}

// crdClient is a client of keptMember's CRDs.
func crdClient(g Gomega) client.Client {
	scheme := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(fl.Member(keptMember).Plane.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// memberClusterEvents polls the Events of reason recorded on a member's MemberCluster.
func memberClusterEvents(member, reason string) func(Gomega) []eventsv1.Event {
	return func(g Gomega) []eventsv1.Event {
		list := &eventsv1.EventList{}
		g.Expect(fl.Hub.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "MemberCluster" && e.Regarding.Name == member && e.Reason == reason {
				out = append(out, e)
			}
		}
		return out
	}
}
