package spokeprovider_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestHangingMemberDelaysNobody: while a member's server accepts connections and never answers,
// the member is Connecting, another member joins at once, and the hanging one is Unreachable once
// ConnectTimeout has passed.
func TestHangingMemberDelaysNobody(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.ConnectTimeout = 6 * time.Second
	f := startProvider(t, opts)
	hole := blackHole(t)

	f.createSecret("hanging", kubeconfigFor(t, memberA, hole.addr))
	g.Eventually(hole.accepted()).WithTimeout(joinTimeout).WithPolling(interval).Should(BeNumerically(">=", 1))
	g.Expect(f.state("hanging")()).To(beNotReady(hubv1alpha1.ConnectingReason))

	joining := time.Now()
	f.createSecret("member-b", memberB.Kubeconfig())
	g.Eventually(f.state("member-b")).WithTimeout(opts.ConnectTimeout/2).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason),
		"the other member joins well before the hanging attempt times out")
	t.Logf("member-b joined %v after its Secret, member hanging still connecting", time.Since(joining).Round(time.Millisecond))
	g.Eventually(f.state("hanging")).WithTimeout(joinTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.UnreachableReason))
}
