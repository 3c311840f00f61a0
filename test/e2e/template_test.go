package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// The template tests run on members of their own, tm1 and tm2: regular control planes
// whose API servers log every write, so that a test proves from a member's audit log that the
// hub wrote its placed bundle once, or not at all. The first template test that runs starts
// them; each test joins them and makes them leave when it ends, so that the rest of the suite
// never sees them.
var templateMemberNames = []string{"tm1", "tm2"}

const (
	// regionLabel is the MemberCluster label the templates read.
	regionLabel = "region"
	// regionMessage is the contract's templated message.
	regionMessage = "endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}"
	// regionLabelValue is the contract's templated label value.
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
// GoTemplate, the contract's message (regionMessage) and label region (regionLabelValue), then edit
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

// TestTemplatePerMemberValuesAndRelabel: with templateEngine GoTemplate, two members
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

// hubMemory samples the hub process's heap in use and resident memory (-1 where its metrics lack
// them).
func hubMemory(g Gomega) (heapInuse, resident float64) {
	m := fl.Metrics(g)
	return fleet.Sample(m, "go_memstats_heap_inuse_bytes"), fleet.Sample(m, "process_resident_memory_bytes")
}

// TestTemplateRenderBombIsBoundedAndIsolated: two FleetBundles pad with printf, 500
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
