package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// gitOpsManager is the field manager of the test's server-side applies, as a GitOps tool's.
const gitOpsManager = "e2e-gitops"

// applyFleetBundle server-side applies a FleetBundle ns/name as a GitOps tool would, from YAML
// as a user writes it: without spec.template.metadata. It deletes it (waiting until it is gone)
// when the test ends.
func applyFleetBundle(t *testing.T, ns, name, key, message string) *hubv1alpha1.FleetBundle {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	fl.MustBindGlobal(t, ns) // the namespace, and the ClusterSet global bound into it: its FleetBundles may place anywhere
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": hubv1alpha1.GroupVersion.String(), "kind": "FleetBundle",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"clusterSelector": map[string]any{"matchLabels": map[string]any{key: "yes"}},
			"template":        map[string]any{"spec": map[string]any{"message": message}},
		},
	}}
	g.Expect(fl.Hub.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(gitOpsManager))).To(Succeed())
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	t.Cleanup(func() { deleteFleetBundle(g, fb) })
	return fb
}

// specFields returns, per field manager (manager/operation/subresource), the fields of the spec
// it owns in fb's managedFields, as JSON; a manager that owns none is absent.
func specFields(g Gomega, fb *hubv1alpha1.FleetBundle) map[string]string {
	out := map[string]string{}
	for _, f := range fb.ManagedFields {
		if f.FieldsV1 == nil {
			continue
		}
		var fields map[string]json.RawMessage
		g.Expect(json.Unmarshal(f.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		if spec, ok := fields["f:spec"]; ok {
			out[f.Manager+"/"+string(f.Operation)+"/"+f.Subresource] = string(spec)
		}
	}
	return out
}

// TestHubNeverChangesAFleetBundleSpec: a FleetBundle applied without spec.template.metadata
// goes through its life (placed, Ready, a member selected out and in again, deleted) and keeps
// generation 1 and its spec's managed fields as the user's apply left them (no hub field
// manager owns a spec field) until its deletion completes. Every version the hub wrote is
// watched, not sampled.
func TestHubNeverChangesAFleetBundleSpec(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.placement/spec", "placement-spec"
	joined(t, "m1", "m2")
	for _, m := range []string{"m1", "m2"} {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	watchCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	w, err := fl.Hub.Watch(watchCtx, &hubv1alpha1.FleetBundleList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	fb := applyFleetBundle(t, ns, "web", key, "spec")
	applied := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), applied)).To(Succeed())
	g.Expect(applied.Generation).To(BeEquivalentTo(1))
	userSpec := specFields(g, applied)
	g.Expect(userSpec).To(HaveLen(1), "only the user's apply owns spec fields: %v", userSpec)
	g.Expect(userSpec).To(HaveKey(gitOpsManager + "/Apply/"))

	everywhere(g, fb, "spec", "m1", "m2")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	ready := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), ready)).To(Succeed())
	g.Expect(ready.Finalizers).To(ContainElement(hubv1alpha1.PlacementFinalizer))
	t.Logf("placed and Ready: generation %d, spec fields owned by %v", ready.Generation, slices.Collect(maps.Keys(specFields(g, ready))))
	g.Expect(ready.Generation).To(BeEquivalentTo(1), "placed and Ready, its finalizer added")
	selectMember(t, "m2", key, "")
	g.Eventually(placed("m2", fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
	// Its ConfigMap goes too, as the garbage collector these members lack would remove it.
	g.Expect(fl.Member("m2").Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
	selectMember(t, "m2", key, "yes")
	everywhere(g, fb, "spec", "m1", "m2")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters.Ready", BeEquivalentTo(2))))
	deleteFleetBundle(g, fb)

	// Every version, from the apply to the deletion.
	var versions []*hubv1alpha1.FleetBundle
	func() {
		for {
			select {
			case e := <-w.ResultChan():
				got, ok := e.Object.(*hubv1alpha1.FleetBundle)
				g.Expect(ok).To(BeTrue(), "watch event %v", e)
				versions = append(versions, got)
				if e.Type == watch.Deleted {
					return
				}
			case <-watchCtx.Done():
				t.Fatalf("the watch ended before the deletion: %v", watchCtx.Err())
			}
		}
	}()
	deleting := 0
	for _, v := range versions {
		if v.DeletionTimestamp.IsZero() {
			g.Expect(v.Generation).To(BeEquivalentTo(1), "resourceVersion %s: the hub changed the spec", v.ResourceVersion)
		} else {
			// The API server bumps the generation once when it sets deletionTimestamp.
			deleting++
			g.Expect(v.Generation).To(BeEquivalentTo(2), "resourceVersion %s (deleting)", v.ResourceVersion)
		}
		g.Expect(specFields(g, v)).To(Equal(userSpec), "resourceVersion %s: the spec's managed fields", v.ResourceVersion)
	}
	g.Expect(deleting).To(BeNumerically(">", 0), "the finalizer held the deletion")
	t.Logf("%d versions watched, generation 1 until the deletion, the spec owned by %s alone", len(versions), gitOpsManager)
}

// TestRegisterForceOntoAnotherClusterCountsNoHeal: a member name registered again (--force)
// for another cluster gets the FleetBundles there as placements, not heals: placement's memory
// is of the cluster (its kube-system uid), not of the name. Moved back, it finds its bundle
// where it left it: no heal either.
func TestRegisterForceOntoAnotherClusterCountsNoHeal(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.placement/moved", "placement-moved"
	cps, err := controlplane.Start(ctx, controlplane.Named(controlplane.Options{}, "elsewhere")...)
	g.Expect(err).NotTo(HaveOccurred())
	elsewhere := cps[0]
	t.Cleanup(func() { _ = elsewhere.Stop() })
	other, err := client.New(elsewhere.Config, client.Options{Scheme: fl.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fleet.EnsureNamespace(ctx, other, ns)).To(Succeed())
	kubeSystem := &corev1.Namespace{}
	g.Expect(other.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, kubeSystem)).To(Succeed())

	fb := placedOn(t, key, ns, "moved", "m2")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Heals", BeZero())))
	m2ID := fl.MemberCluster("m2")(g).Status.ClusterID
	movedBack := false
	registerOnto := func(kubeconfig, id string) {
		t.Helper()
		code, _, _ := hubCommand(t, "register", "m2", "--force", "--member-kubeconfig", kubeconfig, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
		g.Expect(code).To(Equal(0))
		g.Eventually(fl.MemberCluster("m2")).WithTimeout(joinTimeout).WithPolling(interval).Should(And(
			fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), HaveField("Status.ClusterID", id)))
	}
	t.Cleanup(func() {
		if !movedBack {
			registerOnto(fl.Member("m2").Plane.KubeconfigPath, m2ID)
		}
	})

	registerOnto(elsewhere.KubeconfigPath, string(kubeSystem.UID))
	g.Eventually(func(g Gomega) string {
		cm := &corev1.ConfigMap{}
		g.Expect(other.Get(ctx, client.ObjectKeyFromObject(fb), cm)).To(Succeed())
		return cm.Data[configbundlev1alpha1.MessageKey]
	}).WithTimeout(timeout).WithPolling(interval).Should(Equal("moved"), "placed in the other cluster")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	g.Consistently(fleetBundleStatus(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("Heals", BeZero()),
		"a first placement in another cluster is no heal")

	registerOnto(fl.Member("m2").Plane.KubeconfigPath, m2ID)
	movedBack = true
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	g.Consistently(fleetBundleStatus(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("Heals", BeZero()),
		"the bundle left in m2's cluster is found in place")
	g.Expect(healNotes(g, fb)).To(BeEmpty(), "no heal Event (none saying deleted)")
}

// healNotes lists the notes of the PlacedBundleHealed Events on a FleetBundle.
func healNotes(g Gomega, fb *hubv1alpha1.FleetBundle) []string {
	list := &eventsv1.EventList{}
	g.Expect(fl.Hub.List(context.Background(), list, client.InNamespace(fb.Namespace))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "FleetBundle" && e.Regarding.Name == fb.Name && e.Reason == hubv1alpha1.PlacedBundleHealedEvent {
			notes = append(notes, e.Note)
		}
	}
	return notes
}
