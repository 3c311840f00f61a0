package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// quietMember is the member of TestSteadyStateIsSilent, whose kube-apiserver logs every write.
const quietMember = "quiet"

// Sizes of TestSteadyStateIsSilent.
const (
	quietBundles = 200
	// settleTime without a write to the member opens the window: the last writes of the
	// convergence are done.
	settleTime = 5 * time.Second
	// quietWindow is the window in which the hub must write nothing about the member.
	quietWindow = 10 * time.Second
)

// writesBetween returns the writes a control plane served in [from, to) that match keep, one
// line each.
func writesBetween(g Gomega, cp *controlplane.ControlPlane, from, to time.Time, keep func(controlplane.Write) bool) []string {
	writes, err := cp.Writes()
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, w := range writes {
		if !w.At.Before(from) && w.At.Before(to) && keep(w) {
			out = append(out, fmt.Sprintf("%s %s %s/%s %s/%s %d (%s)", w.At.Format(time.StampMilli), w.Verb, w.Resource, w.Subresource, w.Namespace, w.Name, w.Code, w.UserAgent))
		}
	}
	return out
}

// TestSteadyStateIsSilent: once a member's bundles have converged, the hub writes nothing to the
// member and nothing about it to the hub, counted on the API servers' side (audit logs). The
// Fleet's heartbeat, the one planned write, is not about a member.
func TestSteadyStateIsSilent(t *testing.T) {
	g, ctx, c := NewWithT(t), context.Background(), fl.Member(quietMember).Client
	joined(t, quietMember)
	ensureNamespace(g, quietMember, "quiet")
	for i := range quietBundles {
		b := &configbundlev1alpha1.ConfigBundle{}
		b.Namespace, b.Name, b.Spec.Message = "quiet", fmt.Sprintf("b%03d", i), fmt.Sprintf("message %d", i)
		g.Expect(c.Create(ctx, b)).To(Succeed())
	}
	start := time.Now()
	g.Eventually(func(g Gomega) int {
		list := &configbundlev1alpha1.ConfigBundleList{}
		g.Expect(c.List(ctx, list, client.InNamespace("quiet"))).To(Succeed())
		ready := 0
		for _, b := range list.Items {
			if meta.IsStatusConditionTrue(b.Status.Conditions, configbundlev1alpha1.ReadyCondition) {
				ready++
			}
		}
		return ready
	}).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal(quietBundles))
	g.Eventually(func(g Gomega) hubv1alpha1.BundleCounts { return fl.MemberCluster(quietMember)(g).Status.Bundles }).
		WithTimeout(timeout).WithPolling(interval).Should(Equal(hubv1alpha1.BundleCounts{Total: quietBundles, Ready: quietBundles}))
	t.Logf("%d bundles Ready and counted on the hub %v after their creation", quietBundles, time.Since(start).Round(time.Millisecond))

	byHub := func(w controlplane.Write) bool { return strings.HasPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix) }
	aboutQuiet := func(w controlplane.Write) bool {
		return w.Name == quietMember || strings.HasPrefix(w.Name, quietMember+".")
	}
	// The window opens once the hub has written nothing to the member for settleTime: the last
	// status writes of the convergence are done.
	g.Eventually(func(g Gomega) []string {
		return writesBetween(g, fl.Member(quietMember).Plane, time.Now().Add(-settleTime), time.Now(), byHub)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
	from := time.Now()
	g.Consistently(func(g Gomega) []string {
		return append(writesBetween(g, fl.Member(quietMember).Plane, from, time.Now(), byHub),
			writesBetween(g, fl.HubPlane, from, time.Now(), aboutQuiet)...)
	}).WithTimeout(quietWindow).WithPolling(time.Second).Should(BeEmpty(), "writes to the member, or about it to the hub, in steady state")
	t.Logf("no write in %v of steady state", quietWindow)
}
