package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// placementBound is the most a placement may take in this suite, from the FleetBundle's write
// to the ConfigMaps in every selected member, on a loaded two-core machine.
const placementBound = 5 * time.Second

// selectMember puts label key=value on a MemberCluster (kubectl label mc name key=value), and
// takes it off when the test ends; value "" takes it off now.
func selectMember(t *testing.T, name, key, value string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	g.Eventually(func() error { return fl.LabelMember(ctx, name, map[string]string{key: value}) }).
		WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	if value != "" {
		t.Cleanup(func() { selectMember(t, name, key, "") })
	}
}

// newFleetBundle creates a FleetBundle in a hub namespace of its name (bound to the ClusterSet
// global, so that it may select any member), selecting members by key=yes, and deletes it
// (waiting until it is gone) when the test ends.
func newFleetBundle(t *testing.T, ns, name, key string, spec configbundlev1alpha1.ConfigBundleSpec) *hubv1alpha1.FleetBundle {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	fl.MustBindGlobal(t, ns) // the namespace, and the ClusterSet global bound into it: its FleetBundles may place anywhere
	fb := fleet.NewFleetBundle(ns, name, map[string]string{key: "yes"}, spec)
	fb.Spec.Template.Metadata = hubv1alpha1.TemplateMetadata{Labels: map[string]string{"team": "platform"}, Annotations: map[string]string{"owner": "platform@example.com"}}
	g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(g, fb) })
	return fb
}

// placedOn joins members, selects them by key=yes, and places FleetBundle ns/web with message in
// them (the namespace created in each); it returns once every member's ConfigMap has it.
func placedOn(t *testing.T, key, ns, message string, names ...string) *hubv1alpha1.FleetBundle {
	t.Helper()
	g := NewWithT(t)
	joined(t, names...)
	for _, m := range names {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	fb := newFleetBundle(t, ns, "web", key, configbundlev1alpha1.ConfigBundleSpec{Message: message})
	everywhere(g, fb, message, names...)
	return fb
}

// deleteFleetBundle deletes a FleetBundle and waits until it is gone (its finalizer removed).
func deleteFleetBundle(g Gomega, fb *hubv1alpha1.FleetBundle) {
	g.Expect(client.IgnoreNotFound(fl.Hub.Delete(context.Background(), fb))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "FleetBundle %s gone", fb.Name)
}

// fleetBundleStatus reads a FleetBundle's status.
func fleetBundleStatus(fb *hubv1alpha1.FleetBundle) func(Gomega) hubv1alpha1.FleetBundleStatus {
	return fleet.FleetBundleStatus(fl.Hub, fb)
}

// placed returns a function reading the bundle a FleetBundle placed in a member, nil if none.
func placed(member string, fb *hubv1alpha1.FleetBundle) func(Gomega) *configbundlev1alpha1.ConfigBundle {
	return func(g Gomega) *configbundlev1alpha1.ConfigBundle {
		b := &configbundlev1alpha1.ConfigBundle{}
		err := fl.Member(member).Client.Get(context.Background(), client.ObjectKeyFromObject(fb), b)
		if apierrors.IsNotFound(err) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
}

// placedMessage returns a function reading the message of the ConfigMap of a FleetBundle's
// bundle in a member, "" if there is none.
func placedMessage(member string, fb *hubv1alpha1.FleetBundle) func(Gomega) string {
	return func(g Gomega) string {
		cm := &corev1.ConfigMap{}
		err := fl.Member(member).Client.Get(context.Background(), client.ObjectKeyFromObject(fb), cm)
		if apierrors.IsNotFound(err) {
			return ""
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data[configbundlev1alpha1.MessageKey]
	}
}

// everywhere waits until every member's ConfigMap says want, and returns how long it took.
func everywhere(g Gomega, fb *hubv1alpha1.FleetBundle, want string, names ...string) time.Duration {
	start := time.Now()
	g.Eventually(func(g Gomega) {
		for _, m := range names {
			g.Expect(placedMessage(m, fb)(g)).To(Equal(want), m)
		}
	}).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Succeed())
	return time.Since(start)
}

// updateTemplate changes a FleetBundle's template message (as kubectl edit does, again if the
// hub wrote the status meanwhile).
func updateTemplate(g Gomega, fb *hubv1alpha1.FleetBundle, msg string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &hubv1alpha1.FleetBundle{}
		g.Expect(fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got)).To(Succeed())
		got.Spec.Template.Spec.Message = msg
		return fl.Hub.Update(context.Background(), got)
	})
}

// fleetBundleEvents returns a function reading the Events of reason on a FleetBundle.
func fleetBundleEvents(fb *hubv1alpha1.FleetBundle, reason string) func(Gomega) []eventsv1.Event {
	return func(g Gomega) []eventsv1.Event {
		var out []eventsv1.Event
		for _, e := range fl.EventsOn("FleetBundle", fb.Namespace, fb.Name)(g) {
			if e.Reason == reason {
				out = append(out, e)
			}
		}
		return out
	}
}

// failedCluster matches a failedClusters entry.
func failedCluster(cluster, reason string) OmegaMatcher {
	return And(HaveField("Cluster", cluster), HaveField("Reason", reason))
}

// TestPlacementFollowsLabelsTemplateAndDeletion: a FleetBundle reaches the selected members
// only, with the template's labels and annotations and the hub's; a template update reaches
// them all; a label change moves the bundle; deleting the FleetBundle removes every placed
// bundle and the FleetBundle itself.
func TestPlacementFollowsLabelsTemplateAndDeletion(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m1", "m2", "m3")
	const key, ns = "e2e.placement/labels", "placement-labels"
	for _, m := range []string{"m1", "m2", "m3"} {
		ensureNamespace(g, m, ns)
	}
	selectMember(t, "m1", key, "yes")
	selectMember(t, "m2", key, "yes")
	fb := newFleetBundle(t, ns, "web", key, configbundlev1alpha1.ConfigBundleSpec{Message: "v1"})

	t.Logf("create → ConfigMaps in m1 and m2: %v", everywhere(g, fb, "v1", "m1", "m2").Round(time.Millisecond))
	g.Expect(placed("m3", fb)(g)).To(BeNil())
	b := placed("m1", fb)(g)
	g.Expect(b.Labels).To(Equal(map[string]string{"team": "platform", hubv1alpha1.FleetBundleLabel: ns + ".web"}))
	g.Expect(b.Annotations).To(HaveKeyWithValue("owner", "platform@example.com"))
	g.Expect(b.Annotations).To(HaveKey(hubv1alpha1.FleetBundleUIDAnnotation))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason),
		HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2}),
		HaveField("ObservedGeneration", BeEquivalentTo(1)), HaveField("Heals", BeZero())))
	placedIn := func(name string) func(Gomega) int64 {
		return func(g Gomega) int64 { return fl.MemberCluster(name)(g).Status.Bundles.Placed }
	}
	g.Eventually(placedIn("m1")).WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(1), "MemberCluster status.bundles.placed")
	g.Expect(placedIn("m3")(g)).To(BeZero())

	// A template update reaches every selected member, and is no heal.
	var took []time.Duration
	for i := range 5 {
		msg := fmt.Sprintf("v%d", i+2)
		g.Expect(updateTemplate(g, fb, msg)).To(Succeed())
		took = append(took, everywhere(g, fb, msg, "m1", "m2"))
	}
	t.Logf("template update → ConfigMaps in m1 and m2: %v", took)
	for _, d := range took {
		g.Expect(d).To(BeNumerically("<", placementBound))
	}
	g.Consistently(fleetBundleStatus(fb)).WithTimeout(time.Second).WithPolling(interval).Should(HaveField("Heals", BeZero()))
	// Each placement (the create and the five template updates) is in the latency histogram.
	for _, m := range []string{"m1", "m2"} {
		g.Expect(fleet.Sample(fl.Metrics(g), `configbundle_placement_latency_seconds_count{cluster="`+m+`"}`)).To(BeNumerically(">=", 6), m)
	}

	// m2 stops matching, m3 starts: the bundle moves (members here have no garbage collector,
	// so the ConfigMap of m2 stays; its bundle is gone).
	selectMember(t, "m2", key, "")
	selectMember(t, "m3", key, "yes")
	g.Eventually(placed("m2", fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
	g.Eventually(placedMessage("m3", fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("v6"))
	g.Eventually(placedIn("m2")).WithTimeout(timeout).WithPolling(interval).Should(BeZero())
	g.Eventually(placedIn("m3")).WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(1))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2})))
	g.Expect(fl.Member("m2").Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())

	// An invalid selector (In without values) passes admission: it is reported, and nothing in
	// any member changes until it is fixed.
	setSelector := func(sel *metav1.LabelSelector) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &hubv1alpha1.FleetBundle{}
			if err := fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got); err != nil {
				return err
			}
			got.Spec.ClusterSelector = sel
			return fl.Hub.Update(context.Background(), got)
		})).To(Succeed())
	}
	valid := fb.Spec.ClusterSelector
	setSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn}}})
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.InvalidSelectorReason))
	g.Consistently(func(g Gomega) []string { return []string{placedMessage("m1", fb)(g), placedMessage("m3", fb)(g)} }).
		WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"v6", "v6"}), "an invalid selector removes nothing")
	setSelector(valid)
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))

	// Deleting the FleetBundle removes its bundles, then the FleetBundle.
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got)).To(Succeed())
	g.Expect(got.Finalizers).To(ContainElement(hubv1alpha1.PlacementFinalizer))
	deleteFleetBundle(g, fb)
	for _, m := range []string{"m1", "m2", "m3"} {
		g.Eventually(placed(m, fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil(), m)
		_ = fl.Member(m).Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	}
}
