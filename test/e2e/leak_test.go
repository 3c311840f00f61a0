package e2e

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// goroutines reads the hub's go_goroutines gauge.
func goroutines(g Gomega) int {
	for line := range strings.Lines(fl.Metrics(g)) {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			g.Expect(err).NotTo(HaveOccurred())
			return int(n)
		}
	}
	g.Expect("go_goroutines").To(BeEmpty(), "the hub exports no go_goroutines")
	return 0
}

// leave makes a member leave the fleet (its Secret's label removed) and waits until its
// MemberCluster is gone.
func leave(g Gomega, name string) {
	secretLabel(g, name, false)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(context.Background(), client.ObjectKey{Name: name}, &hubv1alpha1.MemberCluster{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// rejoin puts a member's Secret's label back and waits until it is Connected.
func rejoin(g Gomega, name string) {
	secretLabel(g, name, true)
	g.Eventually(fl.MemberCluster(name)).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
}

// secretLabel puts the label that makes a member's Secret join on it, or takes it off.
func secretLabel(g Gomega, name string, on bool) {
	ctx := context.Background()
	s := &corev1.Secret{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, s)).To(Succeed())
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if on {
		s.Labels[hubv1alpha1.DefaultSecretLabel] = "true"
	} else {
		delete(s.Labels, hubv1alpha1.DefaultSecretLabel)
	}
	g.Expect(fl.Hub.Update(ctx, s)).To(Succeed())
}

// flap makes a member leave and join again, and waits for both.
func flap(g Gomega, name string) {
	leave(g, name)
	rejoin(g, name)
}

// settledGoroutines waits until the hub's goroutine count settles (three readings a second apart
// within settleNoise of each other) and returns the lowest of them: the baseline of a leak bound.
func settledGoroutines(g Gomega) int {
	const settleNoise = 2
	var last []int
	g.Eventually(func(g Gomega) bool {
		last = append(last, goroutines(g))
		if len(last) > 3 {
			last = last[1:]
		}
		return len(last) == 3 && slices.Max(last)-slices.Min(last) <= settleNoise
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue(), "the hub's goroutines never settled: %v", last)
	return slices.Min(last)
}

// TestFaultJoinsAndLeavesLeakNoGoroutines: a member that leaves takes everything the hub started
// for it along (watches, caches, probes, reconciler memory), however often it comes and goes.
func TestFaultJoinsAndLeavesLeakNoGoroutines(t *testing.T) {
	const flaps = 20
	// slack absorbs goroutines that come and go with other work (HTTP/2 connections, timers,
	// the garbage of earlier tests' namespaces): settled counts of a quiet hub have differed by
	// up to 18. The leak this test guards against (one goroutine per source per join) added
	// about 2.6 goroutines a join, 52 over 20 flaps: more than twice the slack.
	const slack = 24
	g := NewWithT(t)
	joined(t, "m3")
	flap(g, "m3") // the first leave and join start what lives for good (e.g. shared informers of the hub)
	before := settledGoroutines(g)
	for range flaps {
		flap(g, "m3")
	}
	after := 0
	g.Eventually(func(g Gomega) int { after = goroutines(g); return after }).WithTimeout(timeout).WithPolling(interval).
		Should(BeNumerically("<=", before+slack), "goroutines after %d joins and leaves (settled baseline %d)", flaps, before)
	t.Logf("hub goroutines: %d settled before, %d after %d joins and leaves", before, after, flaps)
}
