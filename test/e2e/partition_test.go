package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/netproxy"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// The bounds of the partition test, from the hub's probing: the binary runs with
// --probe-interval=probeInterval and has no flag for the probe timeout or the failure threshold,
// so they are the provider's defaults.
const (
	probeTimeout     = min(spokeprovider.DefaultProbeTimeout, probeInterval)
	failureThreshold = spokeprovider.DefaultFailureThreshold
	// unreachableBound: the first probe after the partition starts within one interval, each
	// failed probe but the last is followed by another within one interval, and the last fails
	// after the probe timeout.
	unreachableBound = probeInterval*failureThreshold + probeTimeout
	// recoveryBound: the first probe after the heal starts within one interval, on a new
	// connection, and answers.
	recoveryBound = probeInterval + probeTimeout
	// reportSlack covers what follows the provider's verdict: the MemberCluster's status write
	// (or the heal's reconcile) and this test's polling, on a loaded two-core machine.
	reportSlack = 2 * time.Second
)

// TestFaultNetworkPartition: the hub's connections to a member whose API server keeps running
// are black-holed, as a dropped network does (the fault matrix). The member is Unreachable
// within the probes' bound and the Fleet says so; drift made meanwhile, straight through the
// member's API server (only the hub's path is cut), is healed once the path is back, and
// nothing is lost or counted twice. The partition ends either with its connections reset, or
// with them dead for good behind a middlebox that lost their state: HTTP/2 would reuse those
// until its health check gave up, 45 s later, unless the hub drops them.
func TestFaultNetworkPartition(t *testing.T) {
	t.Run("connections reset", func(t *testing.T) { partition(t, "partitioned-reset", (*netproxy.Proxy).Heal) })
	t.Run("connections dead", func(t *testing.T) { partition(t, "partitioned-dead", (*netproxy.Proxy).HealLeavingDead) })
}

// partition runs TestFaultNetworkPartition with member m2 joined as name, ending the partition
// with heal.
func partition(t *testing.T, name string, heal func(*netproxy.Proxy)) {
	g, ctx := NewWithT(t), context.Background()
	const member = "m2"
	proxy, err := netproxy.Start(fl.Member(member).Plane.Host())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(proxy.Close()).To(Succeed()) })
	standAside(t, member)

	// The member joins as "partitioned", through the proxy. The member's serving certificate is
	// for 127.0.0.1, so TLS verifies through the proxy's loopback address too.
	cfg := rest.CopyConfig(fl.Member(member).Plane.Config)
	cfg.Host = "https://" + proxy.Addr()
	fl.MustPutSecret(g, name, map[string][]byte{hubv1alpha1.DefaultSecretKey: fleet.KubeconfigFor(cfg)})
	t.Cleanup(func() {
		fl.MustDeleteSecret(g, name)
		g.Eventually(memberClusterGone(name)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	})
	g.Eventually(fl.MemberCluster(name)).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	const want = "across the partition"
	b := createBundle(g, member, name, "web", want)
	g.Eventually(bundleStatus(member, b)).WithTimeout(timeout).WithPolling(interval).Should(And(
		HaveField("Heals", BeZero()), HaveField("ConfigMapRef", Not(BeNil()))))

	// Partitioned: Unreachable within the bound, and the Fleet is not Ready.
	proxy.Partition()
	partitioned := time.Now()
	var unreachableAfter time.Duration
	g.Eventually(func(g Gomega) {
		if unreachableAfter == 0 && matches(fl.MemberCluster(name)(g), fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.UnreachableReason)) {
			unreachableAfter = time.Since(partitioned)
		}
		g.Expect(unreachableAfter).NotTo(BeZero(), "Unreachable")
		g.Expect(fl.Fleet(g)).To(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.MembersNotReadyReason))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	t.Logf("partition → Unreachable: %v (bound %v: probe interval %v × failure threshold %d + probe timeout %v)",
		unreachableAfter.Round(time.Millisecond), unreachableBound, probeInterval, failureThreshold, probeTimeout)
	g.Expect(unreachableAfter).To(BeNumerically("<", unreachableBound+reportSlack))

	// The API server is up: anyone else still reaches it, and the hub cannot heal what they do.
	tamper(g, member, b)
	g.Consistently(fl.Member(member).Message(b)).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("tampered"))

	// Healed: Connected again, and the drift healed, each within a probe and a report.
	heal(proxy)
	healed := time.Now()
	var connectedAfter, driftHealedAfter time.Duration
	g.Eventually(func(g Gomega) {
		if connectedAfter == 0 && matches(fl.MemberCluster(name)(g), fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason)) {
			connectedAfter = time.Since(healed)
		}
		if driftHealedAfter == 0 && fl.Member(member).Message(b)(g) == want {
			driftHealedAfter = time.Since(healed)
		}
		g.Expect(connectedAfter).NotTo(BeZero(), "Connected")
		g.Expect(driftHealedAfter).NotTo(BeZero(), "drift healed")
	}).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	t.Logf("heal → Connected: %v; heal → drift healed: %v (bound %v: probe interval %v + probe timeout %v)",
		connectedAfter.Round(time.Millisecond), driftHealedAfter.Round(time.Millisecond), recoveryBound, probeInterval, probeTimeout)
	g.Expect(connectedAfter).To(BeNumerically("<", recoveryBound+reportSlack))
	g.Expect(driftHealedAfter).To(BeNumerically("<", recoveryBound+reportSlack))
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).ShouldNot(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.MembersNotReadyReason))

	// Nothing lost, nothing counted twice: the status records the healed ConfigMap and one heal.
	recorded := func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(fl.Member(member).Client.Get(ctx, client.ObjectKeyFromObject(b), cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, want))
		status := bundleStatus(member, b)(g)
		g.Expect(status.ConfigMapRef).NotTo(BeNil())
		g.Expect(status.ConfigMapRef.UID).To(Equal(cm.UID))
		g.Expect(status.ConfigMapRef.ResourceVersion).To(Equal(cm.ResourceVersion))
		g.Expect(status.Heals).To(BeEquivalentTo(1))
		ready := meta.FindStatusCondition(status.Conditions, configbundlev1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	}
	g.Eventually(recorded).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Consistently(recorded).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
}

// standAside has a member's own Secret, if it is joined, leave the hub for the rest of the test:
// the hub manages a cluster under one name only (spoke-provider's TestDuplicateCluster), and the
// test manages it under another. The test's cleanup brings it back and waits until it is Ready.
func standAside(t *testing.T, name string) {
	t.Helper()
	g, ctx := NewWithT(t), context.Background()
	secret := &corev1.Secret{}
	err := fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret)
	if apierrors.IsNotFound(err) || secret.Labels[hubv1alpha1.DefaultSecretLabel] != "true" {
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	delete(secret.Labels, hubv1alpha1.DefaultSecretLabel)
	g.Expect(fl.Hub.Update(ctx, secret)).To(Succeed())
	t.Cleanup(func() {
		g.Expect(fl.Hub.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[hubv1alpha1.DefaultSecretLabel] = "true"
		g.Expect(fl.Hub.Update(ctx, secret)).To(Succeed())
		g.Eventually(fl.MemberCluster(name)).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	})
	g.Eventually(memberClusterGone(name)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// memberClusterGone returns a function reporting whether a MemberCluster no longer exists.
func memberClusterGone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(context.Background(), client.ObjectKey{Name: name}, &hubv1alpha1.MemberCluster{}))
	}
}

// bundleStatus returns a function reading a bundle's status in a member.
func bundleStatus(member string, b *configbundlev1alpha1.ConfigBundle) func(Gomega) configbundlev1alpha1.ConfigBundleStatus {
	return func(g Gomega) configbundlev1alpha1.ConfigBundleStatus {
		got := &configbundlev1alpha1.ConfigBundle{}
		g.Expect(fl.Member(member).Client.Get(context.Background(), client.ObjectKeyFromObject(b), got)).To(Succeed())
		return got.Status
	}
}

// matches reports whether actual satisfies matcher; a matcher's error counts as no.
func matches(actual any, matcher OmegaMatcher) bool {
	ok, err := matcher.Match(actual)
	return ok && err == nil
}
