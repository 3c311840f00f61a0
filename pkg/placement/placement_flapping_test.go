package placement_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// flapWatch records, from watches, what the FleetBundle's status and the placed bundle in a
// member reported: the highest heals, and every ConfigMapConflict.
type flapWatch struct {
	mu        sync.Mutex
	heals     int64
	conflicts []string
}

func (f *flapWatch) note(heals int64, conflict string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heals = max(f.heals, heals)
	if conflict != "" {
		f.conflicts = append(f.conflicts, conflict)
	}
}

// watchFlaps records, until ctx ends, the FleetBundle's status on the hub (polled every 10 ms)
// and every version of its placed bundle in member (watched).
func watchFlaps(t *testing.T, ctx context.Context, fb *hubv1alpha1.FleetBundle, member string) *flapWatch {
	t.Helper()
	g := NewWithT(t)
	seen := &flapWatch{}
	cl, err := members.Get(ctx, multicluster.ClusterName(member))
	g.Expect(err).NotTo(HaveOccurred())
	watcher, err := client.NewWithWatch(cl.GetConfig(), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	memberWatch, err := watcher.Watch(ctx, &configbundlev1alpha1.ConfigBundleList{}, client.InNamespace(fb.Namespace))
	g.Expect(err).NotTo(HaveOccurred())
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			got := &hubv1alpha1.FleetBundle{}
			if hub.Get(ctx, client.ObjectKeyFromObject(fb), got) == nil {
				conflict := ""
				for _, f := range got.Status.FailedClusters {
					if f.Reason == configbundlev1alpha1.ConfigMapConflictReason {
						conflict = "FleetBundle: " + f.Cluster + ": " + f.Message
					}
				}
				seen.note(got.Status.Heals, conflict)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		defer memberWatch.Stop()
		for e := range memberWatch.ResultChan() {
			if b, ok := e.Object.(*configbundlev1alpha1.ConfigBundle); ok {
				if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil && c.Reason == configbundlev1alpha1.ConfigMapConflictReason {
					seen.note(0, "bundle uid "+string(b.UID)+": "+c.Message)
				}
			}
		}
	}()
	return seen
}

// TestLabelFlappingCountsNoHealAndNoConflict: a MemberCluster label flapping out of the
// selector and in again, fast, many times, makes the hub remove and place the bundle again each
// time: none of it is a heal, and a re-placed bundle never reports ConfigMapConflict against the
// ConfigMap its removed copy left (these members have no garbage collector: it stays, the
// longest a collector could take); the bundle ends Ready.
func TestLabelFlappingCountsNoHealAndNoConflict(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, flaps = "test.placement/flap", 40
	ns := newNamespace(t, memberA)
	labelMember(t, memberA, key, "yes")
	fb := newFleetBundle(t, ns, selecting(key), "flap")
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	seen := watchFlaps(t, watchCtx, fb, memberA)

	start := time.Now()
	for i := range flaps {
		labelMember(t, memberA, key, "")
		if i%2 == 0 { // every other flap waits for the removal, so that each placement follows a removal
			g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(BeNil())
		}
		labelMember(t, memberA, key, "yes")
		if i%4 == 0 {
			g.Eventually(placed(memberA, fb)).WithTimeout(timeout).WithPolling(10 * time.Millisecond).ShouldNot(BeNil())
		}
	}
	t.Logf("%d flaps in %v", flaps, time.Since(start).Round(time.Millisecond))
	g.Eventually(message(memberA, fb)).WithTimeout(timeout).WithPolling(interval).Should(Equal("flap"))
	g.Eventually(status(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters.Ready", BeEquivalentTo(1))))
	g.Consistently(status(fb)).WithTimeout(quietPeriod).WithPolling(interval).Should(HaveField("Heals", BeZero()))
	seen.mu.Lock()
	heals, conflicts := seen.heals, slices.Clone(seen.conflicts)
	seen.mu.Unlock()
	t.Logf("after %d flaps: heals %d, ConfigMapConflict reported %d times", flaps, heals, len(conflicts))
	g.Expect(heals).To(BeZero(), "heals seen during the flapping")
	g.Expect(conflicts).To(BeEmpty(), "ConfigMapConflict seen during the flapping")
	g.Expect(healEvents(fb)(g)).To(BeEmpty())
}
