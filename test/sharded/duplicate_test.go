package sharded

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestDuplicateReplicaIDWritesNothing: a second hub process started with the replica id of the
// live replica r0 writes nothing to any member: drifts made while it runs, before and after it
// finds out, are healed once each, by their owners. It records DuplicateReplica on the Fleet,
// says so in its metrics, and exits 1; r0 keeps its members and the Fleet stays Ready.
func TestDuplicateReplicaIDWritesNothing(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	own := settledOwners(t, "r0", "r1", "r2")
	// The suite creates the bundles without waiting for them: this test may run first.
	expectHealed(t, names...)
	const name = "r0-again"
	dup, err := fl.StartHub(ctx, name, "--sharded", "--replica-id=r0")
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { fl.StopHub(name, syscall.SIGKILL) })
	from := time.Now()

	// A drift in every member before it finds out, and another once it has.
	for _, m := range names {
		Expect(drift(m, "drifted beside a duplicate")).To(Succeed())
	}
	expectHealed(t, names...)
	var event eventsv1.Event
	Eventually(func(g Gomega) {
		var found []eventsv1.Event
		for _, e := range fl.EventsOn("Fleet", "", hubv1alpha1.FleetName)(g) {
			if e.Reason == hubv1alpha1.DuplicateReplicaEvent && e.EventTime.After(from.Add(-time.Second)) {
				found = append(found, e)
			}
		}
		g.Expect(found).To(HaveLen(1))
		event = found[0]
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	Expect(event.Related).NotTo(BeNil())
	Expect(event.Related.Name).To(Equal(hubv1alpha1.PeerLeasePrefix + "-r0"))
	scrape, err := fl.ScrapeHub(name)
	Expect(err).NotTo(HaveOccurred())
	Expect(fleet.Sample(scrape, "configbundle_hub_duplicate_replica")).To(BeEquivalentTo(1))
	for _, m := range names {
		Expect(drift(m, "drifted again beside a duplicate")).To(Succeed())
	}
	expectHealed(t, names...)

	Eventually(dup.Exited).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	Expect(dup.ExitCode()).To(Equal(1))
	to := time.Now()
	t.Logf("the duplicate %s: %s", name, event.Note)

	// Each drift healed once, by the member's owner: its ConfigMap written twice, with no
	// refused write; the duplicate healed nothing.
	Expect(countLines(t, name, "Healed drift")).To(BeZero())
	heals := healsIn(t, from, to, "r0", "r1", "r2")
	for _, m := range names {
		var writes []string
		for _, w := range hubWrites(t, m) {
			if w.Received.After(from) && w.Resource == "configmaps" && w.Name == bundleName {
				writes = append(writes, replicaOf(w))
			}
		}
		Expect(writes).To(Equal([]string{own[m], own[m]}), "member %s: the hub's writes of its ConfigMap", m)
		Expect(healsOf(heals, []string{m})).To(HaveLen(2), "member %s", m)
	}
	for _, m := range names {
		all, err := fl.Member(m).Plane.Writes()
		Expect(err).NotTo(HaveOccurred())
		for _, w := range all {
			if replicaOf(w) != "" && w.Received.After(from) {
				Expect(w.Code).To(BeNumerically("<", 300), "member %s: %s %s/%s refused to %s", m, w.Verb, w.Resource, w.Name, w.UserAgent)
			}
		}
	}

	// r0 runs on, with its members, and the Fleet is Ready.
	Expect(fl.HubProcess("r0").Exited()).To(BeFalse())
	Expect(settledOwners(t, "r0", "r1", "r2")).To(Equal(own))
	f := &hubv1alpha1.Fleet{}
	Eventually(func(g Gomega) {
		g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(f.Status.Conditions, hubv1alpha1.ReadyCondition)).To(BeTrue(), "%v", f.Status.Conditions)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	Expect(strings.Contains(dup.LogTail(1<<16), "Another live process holds this replica's id")).To(BeTrue())
}
