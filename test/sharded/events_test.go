package sharded

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestFleetBundleFailuresAreReportedOncePerMember: a FleetBundle in Conflict in two members that
// two replicas manage raises one ClusterFailing Event per member (from its owner), and one
// ClusterRecovered each once the conflicts go; its gauges come from one replica alone, with
// the sum of the shares, and go with it.
func TestFleetBundleFailuresAreReportedOncePerMember(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	own := settledOwners(t, "r0", "r1", "r2")
	conflicted := []string{membersOf(own, "r0")[0], membersOf(own, "r1")[0]}
	name := fmt.Sprintf("conflicted-%d", time.Now().UnixNano())
	for _, m := range conflicted {
		Expect(fl.Member(m).Client.Create(ctx, fleet.NewBundle("default", name, "the member's own"))).To(Succeed())
	}
	fl.MustBindGlobal(t, "default") // FleetBundles place only into the members of the ClusterSets bound to their namespace
	fb := fleet.NewFleetBundle("default", name, nil, configbundlev1alpha1.ConfigBundleSpec{Message: "placed where it may"})
	Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	events := func(reason string) func(Gomega) []eventsv1.Event {
		return func(g Gomega) []eventsv1.Event {
			var out []eventsv1.Event
			for _, e := range fl.EventsOn("FleetBundle", fb.Namespace, fb.Name)(g) {
				if e.Reason == reason && e.Regarding.UID == fb.UID {
					out = append(out, e)
				}
			}
			return out
		}
	}
	aboutEach := func(eventType string) []any {
		var out []any
		for _, m := range conflicted {
			out = append(out, And(HaveField("Type", eventType), HaveField("Related.Name", m), HaveField("Series", BeNil()),
				HaveField("Note", ContainSubstring("Member "+m))))
		}
		return out
	}
	Eventually(events(hubv1alpha1.ClusterFailingEvent)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(aboutEach(corev1.EventTypeWarning)...))
	gauges := func(g Gomega) map[string][3]float64 {
		out := map[string][3]float64{}
		for _, id := range []string{"r0", "r1", "r2"} {
			text, err := fl.ScrapeHub(id)
			g.Expect(err).NotTo(HaveOccurred())
			var v [3]float64
			for i, n := range []string{"selected", "ready", "failed"} {
				v[i] = fleet.Sample(text, fmt.Sprintf(`configbundle_fleetbundle_%s{name=%q,namespace="default"}`, n, name))
			}
			if v != [3]float64{-1, -1, -1} {
				out[id] = v
			}
		}
		return out
	}
	Eventually(gauges).WithTimeout(timeout).WithPolling(interval).Should(And(HaveLen(1),
		ContainElement([3]float64{memberCount, memberCount - 2, 2})), "one replica, the elected one, with the sum")
	Consistently(events(hubv1alpha1.ClusterFailingEvent)).WithTimeout(3 * time.Second).WithPolling(interval).Should(HaveLen(2))

	for _, m := range conflicted {
		b := fleet.NewBundle("default", name, "")
		Expect(fl.Member(m).Client.Delete(ctx, b)).To(Succeed())
		Expect(fl.Member(m).Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: b.ObjectMeta})).To(Succeed())
	}
	Eventually(events(hubv1alpha1.ClusterRecoveredEvent)).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(aboutEach(corev1.EventTypeNormal)...))
	Eventually(gauges).WithTimeout(timeout).WithPolling(interval).Should(And(HaveLen(1), ContainElement([3]float64{memberCount, memberCount, 0})))

	Expect(fl.Hub.Delete(ctx, fb)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "the FleetBundle is released")
	Eventually(gauges).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty(), "its series go with it")
}
