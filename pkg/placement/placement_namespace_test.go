package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// memberNamespace polls namespace ns in a member.
func memberNamespace(member, ns string) func(Gomega) *corev1.Namespace {
	return func(g Gomega) *corev1.Namespace {
		n := &corev1.Namespace{}
		g.Expect(memberClients[member].Get(context.Background(), client.ObjectKey{Name: ns}, n)).To(Succeed())
		return n
	}
}

// TestPlacementCreateNamespace: without spec.createNamespace a member that lacks the namespace
// is reported (NamespaceMissing); with it the hub creates the namespace there, labelled as the
// hub's (one Event naming the member), leaves an existing one alone, and never deletes the one
// it created, not when the FleetBundle goes either.
func TestPlacementCreateNamespace(t *testing.T) {
	g := NewWithT(t)
	const key = "test.placement/createnamespace"
	ns := newNamespace(t, memberA)
	for _, m := range []string{memberA, memberB} {
		labelMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, selecting(key), "v1")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("FailedClusters", ConsistOf(failedCluster(memberB, hubv1alpha1.NamespaceMissingReason))))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.CreateNamespace = true })
	for _, m := range []string{memberA, memberB} {
		g.Eventually(message(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v1"), m)
	}
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("FailedClusters", BeEmpty())))
	g.Expect(memberNamespace(memberB, ns)(g).Labels).To(HaveKeyWithValue(hubv1alpha1.ManagedByLabel, hubv1alpha1.FieldOwner))
	g.Expect(memberNamespace(memberA, ns)(g).Labels).NotTo(HaveKey(hubv1alpha1.ManagedByLabel), "an existing namespace is left alone")
	g.Eventually(memberEvents(fb, hubv1alpha1.NamespaceCreatedEvent)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(
		HaveField("Note", And(ContainSubstring("Member "+memberB), ContainSubstring(ns)))))

	deleteFleetBundle(g, fb)
	g.Expect(placed(memberB, fb)(g)).To(BeNil())
	g.Consistently(memberNamespace(memberB, ns)).WithTimeout(quietPeriod).WithPolling(interval).Should(
		HaveField("DeletionTimestamp", BeNil()), "the hub never deletes a namespace")
}
