package placement_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/template"
)

// A FleetBundle's spec.dataFrom against real members: a labelled hub ConfigMap's data placed in
// each selected member, a change of it rolled out as a new revision, an undo that places a
// revision's copy of it after it changed again, and an unlabelled one that places nothing.

// putSource creates (or updates) hub ConfigMap ns/ca with data, labelled as a source if
// labelled, and deletes it when the test ends.
func putSource(t *testing.T, ns string, labelled bool, data map[string]string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}}
	err := hub.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	if apierrors.IsNotFound(err) {
		t.Cleanup(func() { _ = hub.Delete(context.Background(), cm) })
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	cm.Labels = nil
	if labelled {
		cm.Labels = map[string]string{hubv1alpha1.SourceLabel: "true"}
	}
	cm.Data = data
	if cm.ResourceVersion == "" {
		g.Expect(hub.Create(ctx, cm)).To(Succeed())
		return
	}
	g.Expect(hub.Update(ctx, cm)).To(Succeed())
}

// own is the template's own data beside the source's.
var own = map[string]configbundlev1alpha1.DataValue{"own": "1"}

// createSourced creates FleetBundle ns/web selecting key, placing hub ConfigMap ca beside data,
// and deletes it when the test ends.
func createSourced(t *testing.T, ns, key string, data map[string]configbundlev1alpha1.DataValue) *hubv1alpha1.FleetBundle {
	t.Helper()
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key),
		DataFrom:        []hubv1alpha1.DataFromSource{{ConfigMapRef: &hubv1alpha1.SourceReference{Name: "ca"}}},
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Data: data}},
	}}
	NewWithT(t).Expect(hub.Create(context.Background(), fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
	return fb
}

// memberData polls the data of a FleetBundle's ConfigMap in each member (nil where there is
// none), with the revision its bundle holds under the key "revision".
func memberData(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]map[string]string {
	return func(g Gomega) map[string]map[string]string {
		out := map[string]map[string]string{}
		for _, m := range members {
			cm := &corev1.ConfigMap{}
			err := memberClients[m].Get(context.Background(), client.ObjectKeyFromObject(fb), cm)
			if apierrors.IsNotFound(err) {
				out[m] = nil
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			data := map[string]string{}
			for k, v := range cm.Data {
				if k != configbundlev1alpha1.MessageKey {
					data[k] = v
				}
			}
			if b := placed(m, fb)(g); b != nil {
				data["revision"] = b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation]
			}
			out[m] = data
		}
		return out
	}
}

// everyMemberHas is what memberData returns when every member holds ca.crt of revision rev.
func everyMemberHas(rev, ca string, members ...string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range members {
		out[m] = map[string]string{"ca.crt": ca, "own": "1", "revision": rev}
	}
	return out
}

// TestDataFromPlacesLabelledSource: a labelled hub ConfigMap's data reaches every selected
// member beside the template's data, a value holding "{{" as written, with GoTemplate too; a
// change of it is a new revision, rolled out canary first; a change that does not change its
// data is none.
func TestDataFromPlacesLabelledSource(t *testing.T) {
	g := NewWithT(t)
	const key = "test.sources/placed"
	ns, ring := rolloutFixture(t, key)
	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-1 {{ not a template }}"})
	fb := createSourced(t, ns, key, own)
	g.Eventually(memberData(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(
		Equal(everyMemberHas("1", "PEM-1 {{ not a template }}", rolloutMembers...)))
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout, s.TemplateEngine = canaryThenRest(ring), hubv1alpha1.TemplateEngineGoTemplate
	})
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(2, 3))
	g.Expect(memberData(fb, rolloutMembers...)(g)).To(Equal(everyMemberHas("2", "PEM-1 {{ not a template }}", rolloutMembers...)), "GoTemplate: the source's value as written")

	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-2"})
	g.Eventually(memberData(fb, memberA)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyMemberHas("3", "PEM-2", memberA)), "the canary first")
	g.Expect(memberData(fb, memberB, memberC)(g)).To(Equal(everyMemberHas("2", "PEM-1 {{ not a template }}", memberB, memberC)), "the rest while the canary soaks")
	g.Eventually(memberData(fb, rolloutMembers...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyMemberHas("3", "PEM-2", rolloutMembers...)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.RolloutComplete(3, 3))

	cm := &corev1.ConfigMap{}
	g.Expect(hub.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ca"}, cm)).To(Succeed())
	cm.Annotations = map[string]string{"note": "no data changed"}
	g.Expect(hub.Update(context.Background(), cm)).To(Succeed())
	g.Consistently(status(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("ObservedRevision", BeEquivalentTo(3)), "no revision")
}

// TestDataFromUndoRestoresAfterTheSourceChanged: spec.dataFromRevision, as `hub rollout undo`
// writes it, places the copy of the sources revision 1 kept although the source changed since,
// and still once the source is deleted; a later change of the source rolls out again.
func TestDataFromUndoRestoresAfterTheSourceChanged(t *testing.T) {
	g := NewWithT(t)
	const key = "test.sources/undo"
	members := []string{memberA, memberB}
	ns := newNamespace(t, members...)
	for _, m := range members {
		labelMember(t, m, key, "yes")
	}
	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-1"})
	fb := createSourced(t, ns, key, own)
	g.Eventually(memberData(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyMemberHas("1", "PEM-1", members...)))
	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-2"})
	g.Eventually(memberData(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyMemberHas("2", "PEM-2", members...)))

	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.DataFromRevision = &hubv1alpha1.DataFromRevision{Revision: 1, SourcesHash: template.SourcesHash(map[string]string{"ca.crt": "PEM-2"})}
	})
	g.Eventually(memberData(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyMemberHas("1", "PEM-1", members...)))
	g.Expect(hub.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}})).To(Succeed())
	g.Consistently(memberData(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(everyMemberHas("1", "PEM-1", members...)),
		"the source deleted, the revision's copy stays")
	g.Expect(status(fb)(g)).To(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))

	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-3"})
	g.Eventually(memberData(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(everyMemberHas("3", "PEM-3", members...)), "a new change rolls out")
}

// TestDataFromUnlabelledSourceIsNotFound: a source that is not labelled is SourceNotFound, with
// a message naming the label and one Warning Event, and nothing is written to any member; once
// labelled, it is placed.
func TestDataFromUnlabelledSourceIsNotFound(t *testing.T) {
	g := NewWithT(t)
	const key = "test.sources/unlabelled"
	ns := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	putSource(t, ns, false, map[string]string{"ca.crt": "PEM-1"})
	fb := createSourced(t, ns, key, nil)
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.SourceNotFoundReason),
		HaveField("Conditions", ContainElement(HaveField("Message", ContainSubstring(hubv1alpha1.SourceLabel))))))
	g.Consistently(placed(memberA, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "nothing is written")
	events := rolloutEvents(fb, hubv1alpha1.SourceNotFoundEvent)
	g.Eventually(events).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(HaveField("Type", corev1.EventTypeWarning)))
	g.Expect(status(fb)(g)).To(HaveField("ObservedRevision", BeEquivalentTo(0)), "no revision")

	putSource(t, ns, true, map[string]string{"ca.crt": "PEM-1"})
	g.Eventually(memberData(fb, memberA)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]map[string]string{memberA: {"ca.crt": "PEM-1", "revision": "1"}}))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	g.Expect(events(g)).To(HaveLen(1), "one Warning Event")
}
