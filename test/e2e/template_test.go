package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// The template tests (issue 24) run on members of their own, tm1 and tm2: regular control planes
// whose API servers log every write, so that a test proves from a member's audit log that the
// hub wrote its placed bundle once, or not at all. The first template test that runs starts
// them; each test joins them and makes them leave when it ends, so that the rest of the suite
// never sees them.
var templateMemberNames = []string{"tm1", "tm2"}

const (
	// regionLabel is the MemberCluster label the templates read.
	regionLabel = "region"
	// regionMessage is the issue's templated message.
	regionMessage = "endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}"
	// regionLabelValue is the issue's templated label value.
	regionLabelValue = "{{ .Cluster.Labels.region }}"
)

// templateSet starts the template members once, for the tests that use them.
var templateSet = &auditedMembers{kind: "template", names: templateMemberNames}

// regionRendered is regionMessage rendered for member in region.
func regionRendered(region, member string) string {
	return fmt.Sprintf("endpoint=https://api.%s.example.com cluster=%s", region, member)
}

// templateMembers starts the template members (once), joins both and makes them leave when the
// test ends (after the test's other cleanups: its FleetBundles are gone by then).
func templateMembers(t *testing.T) {
	t.Helper()
	templateSet.join(t, templateMemberNames...)
}

// templateFixture joins tm1 and tm2, creates namespace ns in each, selects both by key=yes and
// gives each the labels of labels[member].
func templateFixture(t *testing.T, ns, key string, labels map[string]map[string]string) {
	t.Helper()
	g := NewWithT(t)
	templateMembers(t)
	for _, m := range templateMemberNames {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
		for k, v := range labels[m] {
			selectMember(t, m, k, v)
		}
	}
}

// newTemplatedBundle creates FleetBundle ns/name selecting members by key=yes, with templateEngine
// GoTemplate, the message (regionMessage) and label region (regionLabelValue), then edit
// (nil: none) applied to its spec; it deletes it (waiting until it is gone) when the test ends.
func newTemplatedBundle(t *testing.T, ns, name, key string, edit func(*hubv1alpha1.FleetBundleSpec)) *hubv1alpha1.FleetBundle {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	fl.MustBindGlobal(t, ns) // the namespace, and the ClusterSet global bound into it: its FleetBundles may place anywhere
	fb := fleet.NewFleetBundle(ns, name, map[string]string{key: "yes"}, configbundlev1alpha1.ConfigBundleSpec{Message: regionMessage})
	fb.Spec.TemplateEngine = hubv1alpha1.TemplateEngineGoTemplate
	fb.Spec.Template.Metadata.Labels = map[string]string{regionLabel: regionLabelValue}
	if edit != nil {
		edit(&fb.Spec)
	}
	g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() {
		deleteFleetBundle(g, fb)
		for _, m := range templateMemberNames {
			_ = fl.Member(m).Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
	})
	return fb
}

// messages returns the message of fb's ConfigMap in each member ("" where there is none), for
// Eventually and Consistently.
func messages(fb *hubv1alpha1.FleetBundle, members ...string) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, m := range members {
			out[m] = placedMessage(m, fb)(g)
		}
		return out
	}
}

// bundleRegion returns a function reading the region label of fb's placed bundle in member
// ("<none>" without a bundle).
func bundleRegion(member string, fb *hubv1alpha1.FleetBundle) func(Gomega) string {
	return func(g Gomega) string {
		b := placed(member, fb)(g)
		if b == nil {
			return "<none>"
		}
		return b.Labels[regionLabel]
	}
}

// noBundleWrites checks, from the members' audit logs (after a barrier), that the hub wrote fb's
// placed bundle in none of members since then.
func noBundleWrites(g Gomega, fb *hubv1alpha1.FleetBundle, since time.Time, members ...string) {
	auditBarrier(g, members...)
	for _, m := range members {
		w := bundleWrites(g, m, fb, since)
		g.Expect(w).To(BeEmpty(), "the hub wrote %s's bundle: %v", m, writeTimes(w))
	}
}

// readyReason matches a FleetBundle status whose Ready condition has reason; a failure shows the
// condition's message too.
func readyReason(reason string) OmegaMatcher {
	return WithTransform(func(s hubv1alpha1.FleetBundleStatus) string {
		c := meta.FindStatusCondition(s.Conditions, hubv1alpha1.ReadyCondition)
		if c == nil {
			return "no Ready condition"
		}
		return c.Reason + ": " + c.Message
	}, HavePrefix(reason+": "))
}

// readyInBoth matches the status of a FleetBundle Ready in both template members, selected.
func readyInBoth() OmegaMatcher {
	n := int32(len(templateMemberNames))
	return And(readyReason(hubv1alpha1.AllReadyReason), HaveField("FailedClusters", BeEmpty()),
		HaveField("Clusters.Selected", n), HaveField("Clusters.Ready", n))
}

// TestTemplatePerMemberValuesAndRelabel (issue 24): with templateEngine GoTemplate, two members
// with region labels each get their own message and label (rendered from .Cluster.Labels.region
// and .Cluster.Name). Relabelling one MemberCluster re-renders it alone: exactly one write of its
// placed bundle, none to the other member (both from the audit logs); the re-render is no heal
// (status.heals stays 0, no PlacedBundleHealed Event). A label change that renders the same bytes
// (a label the template does not read) writes nothing.
func TestTemplatePerMemberValuesAndRelabel(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.template/relabel", "template-relabel"
	templateFixture(t, ns, key, map[string]map[string]string{"tm1": {regionLabel: "eu"}, "tm2": {regionLabel: "us"}})
	fb := newTemplatedBundle(t, ns, "web", key, nil)

	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": regionRendered("eu", "tm1"), "tm2": regionRendered("us", "tm2")}))
	g.Expect(bundleRegion("tm1", fb)(g)).To(Equal("eu"))
	g.Expect(bundleRegion("tm2", fb)(g)).To(Equal("us"))
	g.Expect(placed("tm1", fb)(g).Spec.Message).To(Equal(regionRendered("eu", "tm1")), "the placed bundle holds the rendered message")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(readyInBoth(), HaveField("Heals", BeZero())))

	// tm1 moves to region ap: one write to tm1, none to tm2.
	relabelled := time.Now()
	selectMember(t, "tm1", regionLabel, "ap")
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal(map[string]string{
		"tm1": regionRendered("ap", "tm1"), "tm2": regionRendered("us", "tm2")}))
	t.Logf("relabel → tm1's ConfigMap re-rendered: %v", time.Since(relabelled).Round(time.Millisecond))
	g.Eventually(bundleRegion("tm1", fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("ap"))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
	g.Consistently(fleetBundleStatus(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("Heals", BeZero()),
		"a re-render after a label change is no heal")
	g.Expect(healNotes(g, fb)).To(BeEmpty(), "no PlacedBundleHealed Event")
	auditBarrier(g, templateMemberNames...)
	w := bundleWrites(g, "tm1", fb, relabelled)
	g.Expect(w).To(HaveLen(1), "tm1's writes after its relabel: %v", writeTimes(w))
	w = bundleWrites(g, "tm2", fb, relabelled)
	g.Expect(w).To(BeEmpty(), "tm2's writes after tm1's relabel: %v", writeTimes(w))

	// A label the template does not read: the same bytes, no write anywhere.
	unread := time.Now()
	selectMember(t, "tm1", "e2e.template/unread", "x")
	g.Eventually(func(g Gomega) map[string]string { return fl.MemberCluster("tm1")(g).Labels }).WithTimeout(timeout).WithPolling(interval).
		Should(HaveKeyWithValue("e2e.template/unread", "x"))
	g.Consistently(messages(fb, templateMemberNames...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": regionRendered("ap", "tm1"), "tm2": regionRendered("us", "tm2")}))
	noBundleWrites(g, fb, unread, templateMemberNames...)
	g.Expect(fleetBundleStatus(fb)(g)).To(And(readyInBoth(), HaveField("Heals", BeZero())))
	g.Expect(healNotes(g, fb)).To(BeEmpty(), "no PlacedBundleHealed Event")
}

// TestTemplateRenderFailedForOneMember (issue 24): a selected member without the label the
// template reads is in status.failedClusters with reason RenderFailed and the error (naming the
// field and the missing key), and nothing is written to it (its audit log), while the other member
// is placed and Ready. Adding the label places the bundle there, and the FleetBundle becomes
// Ready.
func TestTemplateRenderFailedForOneMember(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.template/missing", "template-missing"
	templateFixture(t, ns, key, map[string]map[string]string{"tm1": {regionLabel: "eu"}})
	created := time.Now()
	fb := newTemplatedBundle(t, ns, "web", key, nil)

	g.Eventually(placedMessage("tm1", fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal(regionRendered("eu", "tm1")))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason),
		HaveField("FailedClusters", ConsistOf(And(failedCluster("tm2", hubv1alpha1.RenderFailedReason),
			HaveField("Message", And(ContainSubstring("spec.template.spec.message"), ContainSubstring(`"region"`)))))),
		HaveField("Clusters.Selected", BeEquivalentTo(2)), HaveField("Clusters.Ready", BeEquivalentTo(1)), HaveField("Clusters.Failed", BeEquivalentTo(1))))
	s := fleetBundleStatus(fb)(g)
	t.Logf("tm2's failure: %s: %s", s.FailedClusters[0].Reason, s.FailedClusters[0].Message)
	g.Eventually(bundleStatus("tm1", placed("tm1", fb)(g))).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", ContainElement(And(HaveField("Type", configbundlev1alpha1.ReadyCondition), HaveField("Status", metav1.ConditionTrue)))))
	g.Consistently(placed("tm2", fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(BeNil(), "nothing placed in tm2")
	noBundleWrites(g, fb, created, "tm2")

	fixed := time.Now()
	selectMember(t, "tm2", regionLabel, "us")
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal(map[string]string{
		"tm1": regionRendered("eu", "tm1"), "tm2": regionRendered("us", "tm2")}))
	t.Logf("label added → tm2's ConfigMap: %v", time.Since(fixed).Round(time.Millisecond))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
	g.Expect(bundleRegion("tm2", fb)(g)).To(Equal("us"))
}

// TestTemplateOverridesBySelectorInOrder (issue 24): an override whose clusterSelector selects one
// member changes that member's message (and merges its labels) only; with two overrides selecting
// the same member, the later one wins, and swapping their order changes the placed message.
func TestTemplateOverridesBySelectorInOrder(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.template/overrides", "template-overrides"
	templateFixture(t, ns, key, map[string]map[string]string{
		"tm1": {regionLabel: "eu", "env": "dev", "tier": "edge"}, "tm2": {regionLabel: "us", "env": "prod"}})
	fb := newTemplatedBundle(t, ns, "web", key, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Overrides = []hubv1alpha1.TemplateOverride{{
			Name: "dev", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
			Message: ptr.To("debug=true cluster={{ .Cluster.Name }}"), Labels: map[string]string{"tier": "dev"},
		}}
	})
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": "debug=true cluster=tm1", "tm2": regionRendered("us", "tm2")}))
	g.Expect(placed("tm1", fb)(g).Labels).To(And(HaveKeyWithValue("tier", "dev"), HaveKeyWithValue(regionLabel, "eu")))
	g.Expect(placed("tm2", fb)(g).Labels).NotTo(HaveKey("tier"), "the override does not select tm2")
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())

	// Two overrides select tm1: the later one wins.
	first := hubv1alpha1.TemplateOverride{Name: "first", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, Message: ptr.To("from first")}
	second := hubv1alpha1.TemplateOverride{Name: "second", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}, Message: ptr.To("from second")}
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides = []hubv1alpha1.TemplateOverride{first, second} })
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": "from second", "tm2": regionRendered("us", "tm2")}))
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides = []hubv1alpha1.TemplateOverride{second, first} })
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": "from first", "tm2": regionRendered("us", "tm2")}))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
	g.Consistently(placedMessage("tm2", fb)).WithTimeout(time.Second).WithPolling(interval).Should(Equal(regionRendered("us", "tm2")),
		"no order of the overrides changes tm2's message")
}

// TestTemplateInvalidKeepsMembers (issue 24): a template that does not parse, one using range and
// one using define, and an override whose message does not parse, each make the FleetBundle
// Ready=False InvalidTemplate with a message naming the field; meanwhile the members keep what
// they had: no write in their audit logs, not even for a member whose labels change. Fixing the
// template resumes placement. Without templateEngine (None), "{{ .Cluster.Name }}" is placed
// literally.
func TestTemplateInvalidKeepsMembers(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.template/invalid", "template-invalid"
	templateFixture(t, ns, key, map[string]map[string]string{"tm1": {regionLabel: "eu"}, "tm2": {regionLabel: "us"}})
	fb := newTemplatedBundle(t, ns, "web", key, nil)
	before := map[string]string{"tm1": regionRendered("eu", "tm1"), "tm2": regionRendered("us", "tm2")}
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(before))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())

	invalid := time.Now()
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
		editFleetBundle(g, fb, c.edit)
		g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
			condition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.InvalidTemplateReason),
			HaveField("Conditions", ContainElement(And(HaveField("Type", hubv1alpha1.ReadyCondition),
				HaveField("Message", And(ContainSubstring(c.field), ContainSubstring(c.says))))))), c.name)
		got := &hubv1alpha1.FleetBundle{}
		g.Expect(fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got)).To(Succeed())
		for _, cond := range got.Status.Conditions {
			if cond.Type == hubv1alpha1.ReadyCondition {
				t.Logf("%s: Ready=%s %s: %s", c.name, cond.Status, cond.Reason, cond.Message)
			}
		}
		g.Consistently(messages(fb, templateMemberNames...)).WithTimeout(time.Second).WithPolling(interval).Should(Equal(before), c.name)
	}
	// A label change while the template is invalid changes nothing either.
	selectMember(t, "tm1", regionLabel, "ap")
	g.Consistently(messages(fb, templateMemberNames...)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal(before),
		"the members keep what they had while the template is invalid")
	noBundleWrites(g, fb, invalid, templateMemberNames...)

	// Fixed: placement resumes, with tm1's new label.
	editFleetBundle(g, fb, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Template.Spec.Message = regionMessage
		s.Overrides = nil
	})
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": regionRendered("ap", "tm1"), "tm2": regionRendered("us", "tm2")}))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())

	// Without templateEngine, "{{" is placed as written.
	literal := newTemplatedBundle(t, ns, "literal", key, func(s *hubv1alpha1.FleetBundleSpec) {
		s.TemplateEngine = ""
		s.Template.Spec.Message = "cluster={{ .Cluster.Name }}"
		s.Template.Metadata.Labels = nil // "{{ ... }}" is no valid label value
		s.Template.Metadata.Annotations = map[string]string{"region": regionLabelValue}
	})
	g.Eventually(messages(literal, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": "cluster={{ .Cluster.Name }}", "tm2": "cluster={{ .Cluster.Name }}"}))
	g.Expect(placed("tm1", literal)(g).Annotations).To(HaveKeyWithValue("region", regionLabelValue))
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(context.Background(), client.ObjectKeyFromObject(literal), got)).To(Succeed())
	g.Expect(got.Spec.TemplateEngine).To(Equal(hubv1alpha1.TemplateEngineNone), "templateEngine defaults to None")
	g.Eventually(fleetBundleStatus(literal)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
}

// TestTemplateBuiltinFunctions (issue 24): a template may call text/template's built-in
// functions (printf, eq, len, index): each member gets the value rendered with them.
func TestTemplateBuiltinFunctions(t *testing.T) {
	g := NewWithT(t)
	const key, ns = "e2e.template/builtins", "template-builtins"
	templateFixture(t, ns, key, map[string]map[string]string{"tm1": {regionLabel: "eu"}, "tm2": {regionLabel: "us"}})
	fb := newTemplatedBundle(t, ns, "web", key, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Template.Spec.Message = `{{ printf "%s-%s" .Cluster.Name .Cluster.Labels.region }}` +
			`{{ if eq .Cluster.Labels.region "eu" }} gdpr{{ end }} len={{ len .Cluster.Name }} {{ index .Cluster.Labels "region" }}`
	})
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": "tm1-eu gdpr len=3 eu", "tm2": "tm2-us len=3 us"}))
}

// hubMemory samples the hub process's heap in use and resident memory (-1 where its metrics lack
// them).
func hubMemory(g Gomega) (heapInuse, resident float64) {
	m := fl.Metrics(g)
	return fleet.Sample(m, "go_memstats_heap_inuse_bytes"), fleet.Sample(m, "process_resident_memory_bytes")
}

// TestTemplateRenderBombIsBoundedAndIsolated (issue 24): two FleetBundles pad with printf, 500
// times a million bytes each (500 MB if rendered): "bomb" prints them ({{printf "%01000000d" 1}}:
// the output bound of the message refuses it) and "budget" only measures them ({{len (printf
// "%01000000d" 1)}}: a short output, which the render budget refuses before allocating). Each is
// RenderFailed in every member with the error, nothing of either is written to any member (audit
// logs), while a third FleetBundle created with them in the same hub is placed and Ready as usual
// and follows its members' label changes, each of which renders the bombs again. The hub's heap in
// use and resident memory (from its metrics endpoint) stay within 96 MiB of what they were before
// the bombs.
func TestTemplateRenderBombIsBoundedAndIsolated(t *testing.T) {
	g := NewWithT(t)
	const key, ns, calmNS = "e2e.template/bomb", "template-bomb", "template-calm"
	templateFixture(t, ns, key, map[string]map[string]string{"tm1": {regionLabel: "eu"}, "tm2": {regionLabel: "us"}})
	ensureNamespace(g, "tm1", calmNS)
	ensureNamespace(g, "tm2", calmNS)
	heap0, rss0 := hubMemory(g)
	t.Logf("hub before the bombs: heap in use %.1f MiB, resident %.1f MiB", heap0/(1<<20), rss0/(1<<20))

	created := time.Now()
	bombs := []struct {
		fb   *hubv1alpha1.FleetBundle
		says string
	}{
		{newTemplatedBundle(t, ns, "bomb", key, func(s *hubv1alpha1.FleetBundleSpec) {
			s.Template.Spec.Message = strings.Repeat(`{{printf "%01000000d" 1}}`, 500)
			s.Template.Metadata.Labels = nil
		}), fmt.Sprintf("longer than the %d bytes", configbundlev1alpha1.MaxMessageBytes)},
		{newTemplatedBundle(t, ns, "budget", key, func(s *hubv1alpha1.FleetBundleSpec) {
			s.Template.Spec.Message = strings.Repeat(`{{len (printf "%01000000d" 1)}} `, 500)
			s.Template.Metadata.Labels = nil
		}), "more than 4194304 bytes"},
	}
	calm := newTemplatedBundle(t, calmNS, "calm", key, nil)
	var heapMax, rssMax float64
	sample := func(g Gomega) {
		heap, rss := hubMemory(g)
		heapMax, rssMax = max(heapMax, heap), max(rssMax, rss)
	}
	renderFailed := func(says string) OmegaMatcher {
		return And(readyReason(hubv1alpha1.ClustersFailedReason), HaveField("FailedClusters", ConsistOf(
			And(failedCluster("tm1", hubv1alpha1.RenderFailedReason), HaveField("Message", ContainSubstring(says))),
			And(failedCluster("tm2", hubv1alpha1.RenderFailedReason), HaveField("Message", ContainSubstring(says))))))
	}
	for _, b := range bombs {
		g.Eventually(func(g Gomega) hubv1alpha1.FleetBundleStatus {
			sample(g)
			return fleetBundleStatus(b.fb)(g)
		}).WithTimeout(timeout).WithPolling(interval).Should(renderFailed(b.says), b.fb.Name)
		s := fleetBundleStatus(b.fb)(g)
		t.Logf("%s in tm1: %s: %s", b.fb.Name, s.FailedClusters[0].Reason, s.FailedClusters[0].Message)
	}
	g.Eventually(messages(calm, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": regionRendered("eu", "tm1"), "tm2": regionRendered("us", "tm2")}))
	g.Eventually(fleetBundleStatus(calm)).WithTimeout(timeout).WithPolling(interval).Should(readyInBoth())
	t.Logf("bombs and calm created → calm Ready everywhere: %v", time.Since(created).Round(time.Millisecond))

	// Each change of tm1's region renders the bombs again for it, and the calm one anew.
	relabels := time.Now()
	for i := range 10 {
		region := fmt.Sprintf("r%d", i)
		selectMember(t, "tm1", regionLabel, region)
		g.Eventually(func(g Gomega) string {
			sample(g)
			return placedMessage("tm1", calm)(g)
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(regionRendered(region, "tm1")), "the calm FleetBundle follows tm1's label")
	}
	t.Logf("10 relabels of tm1, each followed by the calm FleetBundle: %v", time.Since(relabels).Round(time.Millisecond))
	for _, b := range bombs {
		g.Consistently(func(g Gomega) hubv1alpha1.FleetBundleStatus {
			sample(g)
			return fleetBundleStatus(b.fb)(g)
		}).WithTimeout(time.Second).WithPolling(interval).Should(renderFailed(b.says), b.fb.Name)
		noBundleWrites(g, b.fb, created, templateMemberNames...)
		for _, m := range templateMemberNames {
			g.Expect(placed(m, b.fb)(g)).To(BeNil(), "nothing of %s in %s", b.fb.Name, m)
		}
	}
	g.Expect(fleetBundleStatus(calm)(g)).To(readyInBoth())

	sample(g)
	if heap0 < 0 || rss0 < 0 {
		t.Logf("the hub's metrics have no go_memstats_heap_inuse_bytes or process_resident_memory_bytes: memory not checked")
		return
	}
	t.Logf("hub during the bombs (max of samples): heap in use %.1f MiB (%+.1f), resident %.1f MiB (%+.1f)",
		heapMax/(1<<20), (heapMax-heap0)/(1<<20), rssMax/(1<<20), (rssMax-rss0)/(1<<20))
	g.Expect(heapMax-heap0).To(BeNumerically("<", 96<<20), "the hub's heap in use grew by more than 96 MiB")
	g.Expect(rssMax-rss0).To(BeNumerically("<", 96<<20), "the hub's resident memory grew by more than 96 MiB")
}

// TestTemplateImmutableFreezesOverridesAndEngine (issue 24): through the hub's API server, a
// FleetBundle whose template is immutable (spec.template.spec.immutable: true) refuses a change
// of its overrides (changed, added or removed) and of its templateEngine, with the message
// "overrides and templateEngine are immutable"; a FleetBundle that is not immutable accepts the
// same changes.
func TestTemplateImmutableFreezesOverridesAndEngine(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const ns = "template-immutable"
	fl.MustBindGlobal(t, ns) // the namespace, and the ClusterSet global bound into it: its FleetBundles may place anywhere
	mk := func(name string, immutable bool) *hubv1alpha1.FleetBundle {
		fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: hubv1alpha1.FleetBundleSpec{
			TemplateEngine: hubv1alpha1.TemplateEngineGoTemplate,
			Template:       hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "cluster={{ .Cluster.Name }}", Immutable: immutable}},
			Overrides: []hubv1alpha1.TemplateOverride{
				{Name: "dev", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, Message: ptr.To("debug=true")},
				{Name: "canary", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}, Message: ptr.To("canary=true")},
			},
		}}
		g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
		t.Cleanup(func() { deleteFleetBundle(g, fb) })
		return fb
	}
	frozen, thawed := mk("frozen", true), mk("thawed", false)
	// In this order, so that each applies to a FleetBundle that took the ones before it.
	edits := []struct {
		what string
		edit func(*hubv1alpha1.FleetBundleSpec)
	}{
		{"the overrides reordered", func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides[0], s.Overrides[1] = s.Overrides[1], s.Overrides[0] }},
		{"an override's message changed", func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides[0].Message = ptr.To("debug=false") }},
		{"an override added", func(s *hubv1alpha1.FleetBundleSpec) {
			s.Overrides = append(s.Overrides, hubv1alpha1.TemplateOverride{Name: "prod", ClusterSelector: metav1.LabelSelector{}, Message: ptr.To("prod")})
		}},
		{"the overrides removed", func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides = nil }},
		{"templateEngine to None", func(s *hubv1alpha1.FleetBundleSpec) { s.TemplateEngine = hubv1alpha1.TemplateEngineNone }},
	}
	for _, e := range edits {
		// Again on a conflict (the hub writes the FleetBundle's finalizer and status meanwhile).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &hubv1alpha1.FleetBundle{}
			if err := fl.Hub.Get(ctx, client.ObjectKeyFromObject(frozen), got); err != nil {
				return err
			}
			e.edit(&got.Spec)
			return fl.Hub.Update(ctx, got)
		})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", e.what, err)
		g.Expect(err.Error()).To(ContainSubstring("overrides and templateEngine are immutable"), e.what)
		t.Logf("immutable, %s: %v", e.what, err)
	}
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(frozen), got)).To(Succeed())
	g.Expect(got.Spec.TemplateEngine).To(Equal(hubv1alpha1.TemplateEngineGoTemplate))
	g.Expect(got.Spec.Overrides).To(HaveLen(2))
	g.Expect(got.Spec.Overrides[0].Message).To(Equal(ptr.To("debug=true")), "the order is frozen too")

	for _, e := range edits {
		editFleetBundle(g, thawed, e.edit) // fails the test if refused
		t.Logf("not immutable, %s: accepted", e.what)
	}
}

// TestTemplateRelabelIsNoNewRevision (issue 24): with a staged rollout (spec.rollout), a member
// re-rendered because its labels changed gets its new rendering at once, with the revision it
// holds: status.updateRevision and currentRevision stay 1, no new ControllerRevision is made, the
// placed bundle's revision annotation stays "1", the rollout stays Complete; one write to that
// member, none to the other (audit logs), and no heal.
func TestTemplateRelabelIsNoNewRevision(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.template/rollout", "template-rollout"
	templateFixture(t, ns, key, map[string]map[string]string{"tm1": {regionLabel: "eu"}, "tm2": {regionLabel: "us"}})
	fb := newTemplatedBundle(t, ns, "web", key, func(s *hubv1alpha1.FleetBundleSpec) {
		s.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{stage("first", "", time.Second)}}
	})
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{
		"tm1": regionRendered("eu", "tm1"), "tm2": regionRendered("us", "tm2")}))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(rolloutTimeout).WithPolling(interval).Should(complete(1, 2))
	revs, err := fleet.Revisions(ctx, fl.Hub, fb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(revs).To(HaveLen(1))
	g.Expect(revs[0].Name).To(Equal("web-1"))

	relabelled := time.Now()
	selectMember(t, "tm1", regionLabel, "ap")
	g.Eventually(messages(fb, templateMemberNames...)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Equal(map[string]string{
		"tm1": regionRendered("ap", "tm1"), "tm2": regionRendered("us", "tm2")}))
	t.Logf("relabel → tm1 re-rendered under the rollout: %v", time.Since(relabelled).Round(time.Millisecond))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(complete(1, 2))
	g.Consistently(func(g Gomega) []string {
		revs, err := fleet.Revisions(ctx, fl.Hub, fb)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, r := range revs {
			names = append(names, r.Name)
		}
		g.Expect(fleetBundleStatus(fb)(g)).To(And(revisions(1, 1), HaveField("Heals", BeZero())))
		return names
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal([]string{"web-1"}), "a re-render is no new revision")
	for _, m := range templateMemberNames {
		g.Expect(placed(m, fb)(g).Annotations).To(HaveKeyWithValue(hubv1alpha1.FleetBundleRevisionAnnotation, "1"), m)
	}
	auditBarrier(g, templateMemberNames...)
	w := bundleWrites(g, "tm1", fb, relabelled)
	g.Expect(w).To(HaveLen(1), "tm1's writes after its relabel: %v", writeTimes(w))
	w = bundleWrites(g, "tm2", fb, relabelled)
	g.Expect(w).To(BeEmpty(), "tm2's writes after tm1's relabel: %v", writeTimes(w))
	g.Expect(healNotes(g, fb)).To(BeEmpty(), "no PlacedBundleHealed Event")
}
