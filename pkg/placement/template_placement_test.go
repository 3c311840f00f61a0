package placement_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// Templated FleetBundles placed in real members: member-a and member-b, each rendered from its
// MemberCluster's region label.

// regionMessage is a message rendered from the member's region label and name.
const regionMessage = "endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}"

// regionRendered is regionMessage rendered for member in region.
func regionRendered(region, member string) string {
	return fmt.Sprintf("endpoint=https://api.%s.example.com cluster=%s", region, member)
}

// templateFixture makes a namespace in member-a and member-b, selects both by key and gives each
// the region of regions (none where it has none); it returns the namespace.
func templateFixture(t *testing.T, key string, regions map[string]string) string {
	t.Helper()
	ns := newNamespace(t, memberA, memberB)
	for _, m := range []string{memberA, memberB} {
		labelMember(t, m, key, "yes")
		if r := regions[m]; r != "" {
			labelMember(t, m, "region", r)
		}
	}
	return ns
}

// newTemplatedFleetBundle creates FleetBundle ns/web selecting members by key=yes, with
// templateEngine GoTemplate and regionMessage, then edit (nil: none) applied to its spec, and
// deletes it when the test ends.
func newTemplatedFleetBundle(t *testing.T, ns, key string, edit func(*hubv1alpha1.FleetBundleSpec)) *hubv1alpha1.FleetBundle {
	t.Helper()
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key),
		TemplateEngine:  hubv1alpha1.TemplateEngineGoTemplate,
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: regionMessage}},
	}}
	if edit != nil {
		edit(&fb.Spec)
	}
	NewWithT(t).Expect(hub.Create(context.Background(), fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
	return fb
}

// messages returns the message of fb's placed bundle in each member ("" where there is none).
func messages(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, m := range members {
			out[m] = message(m, fb)(g)
		}
		return out
	}
}

// generations returns the generation of fb's placed bundle in each member (0 where there is
// none): the hub's writes of a bundle's spec each add one.
func generations(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]int64 {
	return func(g Gomega) map[string]int64 {
		out := map[string]int64{}
		for _, m := range members {
			if b := placed(m, fb)(g); b != nil {
				out[m] = b.Generation
			}
		}
		return out
	}
}

// completeAtRevision1 matches the status of a rollout of revision 1 complete in member-a and
// member-b.
func completeAtRevision1() OmegaMatcher {
	return And(HaveField("Rollout", Not(BeNil())), HaveField("Rollout.Phase", hubv1alpha1.RolloutComplete),
		HaveField("CurrentRevision", BeEquivalentTo(1)), HaveField("UpdateRevision", BeEquivalentTo(1)),
		HaveField("Clusters.Updated", BeEquivalentTo(2)), readyInBoth())
}

// readyInBoth matches the status of a FleetBundle Ready in member-a and member-b, selected.
func readyInBoth() OmegaMatcher {
	return And(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("FailedClusters", BeEmpty()),
		HaveField("Clusters.Selected", BeEquivalentTo(2)), HaveField("Clusters.Ready", BeEquivalentTo(2)))
}

// TestTemplateRenderFailedForOneMember: a selected member without the label the template reads
// is in status.failedClusters with reason RenderFailed and the error (naming the field and the
// missing key), and nothing is placed there, while the other member is placed and Ready. Adding
// the label places the bundle there, and the FleetBundle becomes Ready.
func TestTemplateRenderFailedForOneMember(t *testing.T) {
	g := NewWithT(t)
	const key = "test.template/missing"
	ns := templateFixture(t, key, map[string]string{memberA: "eu"})
	fb := newTemplatedFleetBundle(t, ns, key, nil)

	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal(regionRendered("eu", memberA)))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason),
		HaveField("FailedClusters", ConsistOf(And(failedCluster(memberB, hubv1alpha1.RenderFailedReason),
			HaveField("Message", And(ContainSubstring("spec.template.spec.message"), ContainSubstring(`"region"`)))))),
		HaveField("Clusters.Selected", BeEquivalentTo(2)), HaveField("Clusters.Ready", BeEquivalentTo(1)), HaveField("Clusters.Failed", BeEquivalentTo(1))))
	g.Consistently(placed(memberB, fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "nothing placed in member-b")

	labelMember(t, memberB, "region", "us")
	g.Eventually(messages(fb, memberA, memberB)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		memberA: regionRendered("eu", memberA), memberB: regionRendered("us", memberB)}))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
}

// TestTemplateInvalidKeepsMembers: a template that does not parse, one using range and one using
// define, and an override whose message does not parse, each make the FleetBundle Ready=False
// InvalidTemplate with a message naming the field; meanwhile the members keep what they had,
// unwritten, even a member whose labels change. Fixing the template resumes placement. Without
// templateEngine (None, the default), "{{ .Cluster.Name }}" is placed literally.
func TestTemplateInvalidKeepsMembers(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.template/invalid"
	members := []string{memberA, memberB}
	ns := templateFixture(t, key, map[string]string{memberA: "eu", memberB: "us"})
	fb := newTemplatedFleetBundle(t, ns, key, nil)
	before := map[string]string{memberA: regionRendered("eu", memberA), memberB: regionRendered("us", memberB)}
	g.Eventually(messages(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(before))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
	written := generations(fb, members...)(g)

	for _, c := range []struct {
		name, field, says string
		edit              func(*hubv1alpha1.FleetBundleSpec)
	}{
		{"unparsable", "spec.template.spec.message", "unclosed action", func(s *hubv1alpha1.FleetBundleSpec) {
			s.Template.Spec.Message = "endpoint={{ .Cluster.Labels.region"
		}},
		{"range", "spec.template.spec.message", "range", func(s *hubv1alpha1.FleetBundleSpec) {
			s.Template.Spec.Message = "{{ range $k, $v := .Cluster.Labels }}{{ $k }}={{ $v }} {{ end }}"
		}},
		{"define", "spec.template.spec.message", "define", func(s *hubv1alpha1.FleetBundleSpec) {
			s.Template.Spec.Message = `{{ define "x" }}boom{{ end }}cluster={{ .Cluster.Name }}`
		}},
		{"override", "spec.overrides[dev].message", "", func(s *hubv1alpha1.FleetBundleSpec) {
			s.Template.Spec.Message = regionMessage
			s.Overrides = []hubv1alpha1.TemplateOverride{{Name: "dev", ClusterSelector: metav1.LabelSelector{}, Message: ptr.To("{{ if }}")}}
		}},
	} {
		updateFleetBundle(g, fb, c.edit)
		g.Eventually(func(g Gomega) *metav1.Condition {
			return meta.FindStatusCondition(status(fb)(g).Conditions, hubv1alpha1.ReadyCondition)
		}).WithTimeout(timeout).WithPolling(interval).Should(And(Not(BeNil()),
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", hubv1alpha1.InvalidTemplateReason),
			HaveField("Message", And(ContainSubstring(c.field), ContainSubstring(c.says)))), c.name)
		g.Consistently(messages(fb, members...)).WithTimeout(time.Second).WithPolling(interval).Should(Equal(before), c.name)
	}
	// A label change while the template is invalid changes nothing either.
	labelMember(t, memberA, "region", "ap")
	g.Consistently(messages(fb, members...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(before),
		"the members keep what they had while the template is invalid")
	g.Expect(generations(fb, members...)(g)).To(Equal(written), "nothing was written to the members")

	// Fixed: placement resumes, with member-a's new label.
	updateFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Template.Spec.Message = regionMessage
		s.Overrides = nil
	})
	g.Eventually(messages(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		memberA: regionRendered("ap", memberA), memberB: regionRendered("us", memberB)}))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())

	// Without templateEngine, "{{" is placed as written.
	literal := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "literal"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting(key),
		Template: hubv1alpha1.ConfigBundleTemplate{
			Metadata: hubv1alpha1.TemplateMetadata{Annotations: map[string]string{"region": "{{ .Cluster.Labels.region }}"}},
			Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: "cluster={{ .Cluster.Name }}"},
		},
	}}
	g.Expect(hub.Create(ctx, literal)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), literal) })
	g.Eventually(messages(literal, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		memberA: "cluster={{ .Cluster.Name }}", memberB: "cluster={{ .Cluster.Name }}"}))
	g.Expect(placed(memberA, literal)(g).Annotations).To(HaveKeyWithValue("region", "{{ .Cluster.Labels.region }}"))
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(literal), got)).To(Succeed())
	g.Expect(got.Spec.TemplateEngine).To(Equal(hubv1alpha1.TemplateEngineNone), "templateEngine defaults to None")
	g.Eventually(status(literal)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
}

// TestTemplateRelabelIsNoNewRevision: with a staged rollout, a member re-rendered because its
// labels changed gets its new rendering at once, with the revision it holds: updateRevision and
// currentRevision stay 1, no new ControllerRevision is made, the placed bundles' revision
// annotation stays "1", the rollout stays Complete; the other member's bundle is not written, and
// the re-render is no heal.
func TestTemplateRelabelIsNoNewRevision(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key = "test.template/rollout"
	members := []string{memberA, memberB}
	ns := templateFixture(t, key, map[string]string{memberA: "eu", memberB: "us"})
	fb := newTemplatedFleetBundle(t, ns, key, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{
			{Name: "first", ClusterSelector: &metav1.LabelSelector{}, SoakTime: &metav1.Duration{Duration: time.Second}}}}
	})
	g.Eventually(messages(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		memberA: regionRendered("eu", memberA), memberB: regionRendered("us", memberB)}))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(completeAtRevision1())
	revisionNames := func(g Gomega) []string {
		revs, err := fleet.Revisions(ctx, hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, r := range revs {
			names = append(names, r.Name)
		}
		return names
	}
	g.Expect(revisionNames(g)).To(Equal([]string{"web-1"}))
	other := placed(memberB, fb)(g)

	labelMember(t, memberA, "region", "ap")
	g.Eventually(messages(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		memberA: regionRendered("ap", memberA), memberB: regionRendered("us", memberB)}))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(completeAtRevision1())
	g.Consistently(func(g Gomega) []string {
		g.Expect(status(fb)(g)).To(And(completeAtRevision1(), HaveField("Heals", BeZero())))
		return revisionNames(g)
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"web-1"}), "a re-render is no new revision")
	for _, m := range members {
		g.Expect(placed(m, fb)(g).Annotations).To(HaveKeyWithValue(hubv1alpha1.FleetBundleRevisionAnnotation, "1"), m)
	}
	g.Expect(placed(memberB, fb)(g).Generation).To(Equal(other.Generation), "member-b's bundle is not written")
	g.Expect(healEvents(fb)(g)).To(BeEmpty(), "no PlacedBundleHealed Event")
}
