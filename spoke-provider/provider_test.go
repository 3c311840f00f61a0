package spokeprovider_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// TestJoin: a labelled Secret in the provider's namespace makes a member, which joins once it
// answered, its identity is known, its CRDs are served and its caches are warm; other Secrets
// are ignored.
func TestJoin(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), t.Context()
	opts := testOptions()
	opts.CRDs = memberCRDs
	opts.WarmTypes = []client.Object{&corev1.ConfigMap{}}
	f := startProvider(t, opts)

	// An object in the member that the engaged cluster's warm cache must hold.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "join-" + f.ns}}
	g.Expect(memberClients[memberA].Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() { _ = memberClients[memberA].Delete(context.Background(), cm) })

	// Secrets that are no member: unlabelled, labelled "false", in another namespace.
	unlabelled := memberSecret(f.ns, "unlabelled", memberB.Kubeconfig())
	unlabelled.Labels = nil
	labelledFalse := memberSecret(f.ns, "labelled-false", memberB.Kubeconfig())
	labelledFalse.Labels[hubv1alpha1.DefaultSecretLabel] = "false"
	elsewhere := memberSecret(newHubNamespace(t), "elsewhere", memberB.Kubeconfig())
	for _, s := range []*corev1.Secret{unlabelled, labelledFalse, elsewhere} {
		g.Expect(hubClient.Create(ctx, s)).To(Succeed())
	}
	f.createSecret("member-a", memberA.Kubeconfig())

	cl := f.waitReady(g, "member-a")
	st, _ := f.provider.State("member-a")
	g.Expect(st.KubernetesVersion).To(Equal(serverVersion(t, memberA)))
	g.Expect(st.ClusterID).To(Equal(clusterID(t, memberA)))
	g.Expect(st.SecretNamespace).To(Equal(f.ns))
	g.Expect(st.SecretName).To(Equal("member-a"))
	g.Expect(st.LastSeen).NotTo(BeZero())
	g.Expect(f.provider.Connected("member-a")).To(Succeed())

	// The cluster works, and its cache was synced before the member was Ready.
	informer, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(informer.HasSynced()).To(BeTrue(), "the cache of ConfigMaps is cold")
	g.Expect(cl.GetClient().Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
	ns := &corev1.Namespace{}
	g.Expect(cl.GetAPIReader().Get(ctx, client.ObjectKey{Name: "kube-system"}, ns)).To(Succeed())
	g.Expect(string(ns.UID)).To(Equal(st.ClusterID))

	// The manager engaged that very cluster, once, and OnReady said so.
	engaged := f.engaged.of("member-a")
	g.Expect(engaged).To(HaveLen(1))
	g.Expect(engaged[0].Cluster).To(BeIdenticalTo(cl))
	g.Expect(engaged[0].Ended()).To(BeFalse())
	g.Expect(f.history.readiesOf("member-a")).To(HaveLen(1))

	// The other Secrets never become members.
	g.Consistently(func(g Gomega) {
		for _, name := range []string{"unlabelled", "labelled-false", "elsewhere"} {
			_, ok := f.provider.State(name)
			g.Expect(ok).To(BeFalse(), "Secret %s is a member", name)
			g.Expect(f.provider.Connected(multicluster.ClusterName(name))).To(MatchError(multicluster.ErrClusterNotFound))
		}
		g.Expect(f.engaged.names()).To(Equal([]string{"member-a"}))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
}

// TestRotation: a new kubeconfig is connected before it replaces the old connection (make
// before break); a new kubeconfig that does not work leaves the old connection in use.
func TestRotation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := startProvider(t, testOptions())
	f.createSecret("rotating", memberA.Kubeconfig())
	first := f.waitReady(g, "rotating")
	id := clusterID(t, memberA)

	t.Run("to another valid credential", func(t *testing.T) {
		g := NewWithT(t)
		stop := f.watchReadiness("rotating")
		f.setKubeconfig("rotating", userKubeconfig(t, memberA, "rotated-admin"))

		g.Eventually(f.get("rotating")).WithTimeout(joinTimeout).WithPolling(interval).ShouldNot(BeIdenticalTo(first))
		second, _ := f.get("rotating")()
		g.Eventually(func() []engagement { return f.engaged.of("rotating") }).WithTimeout(joinTimeout).WithPolling(interval).Should(
			HaveExactElements(
				SatisfyAll(HaveField("Cluster", BeIdenticalTo(first)), HaveField("Ended()", BeTrue())),
				SatisfyAll(HaveField("Cluster", BeIdenticalTo(second)), HaveField("Ended()", BeFalse()))),
			"the old engagement ends, the new one lives")
		g.Expect(f.engaged.of("rotating")[1].PreviousLive).To(BeTrue(), "the old connection ended before the new one was engaged")

		g.Expect(f.state("rotating")()).To(SatisfyAll(beReady(hubv1alpha1.ConnectedReason), HaveField("ClusterID", id)))
		g.Expect(second.GetAPIReader().List(t.Context(), &corev1.NamespaceList{})).To(Succeed())
		g.Consistently(f.state("rotating")).WithTimeout(quietPeriod).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
		g.Expect(stop()).To(BeEmpty(), "the member was not Ready during the rotation")
	})

	t.Run("to a kubeconfig that does not work", func(t *testing.T) {
		g := NewWithT(t)
		current, _ := f.get("rotating")()
		engaged := len(f.engaged.of("rotating"))
		stop := f.watchReadiness("rotating")
		f.setKubeconfig("rotating", kubeconfigFor(t, memberA, closedPort(t)))

		g.Eventually(f.state("rotating")).WithTimeout(joinTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.RotationFailedReason))
		g.Expect(f.state("rotating")().Message).To(ContainSubstring(hubv1alpha1.UnreachableReason))
		// The old connection stays in use, while the new kubeconfig is retried.
		g.Consistently(func(g Gomega) {
			g.Expect(f.state("rotating")()).To(beReady(hubv1alpha1.RotationFailedReason))
			g.Expect(f.get("rotating")()).To(BeIdenticalTo(current))
			g.Expect(f.provider.Connected("rotating")).To(Succeed())
			g.Expect(f.engaged.of("rotating")).To(HaveLen(engaged))
			g.Expect(f.engaged.of("rotating")[engaged-1].Ended()).To(BeFalse())
		}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
		g.Expect(stop()).To(BeEmpty(), "the member was not Ready after a failed rotation")
	})
}

// TestSupersededWhileConnecting: a connection attempt that hangs does not hold up the next
// kubeconfig, and its late failure changes nothing.
func TestSupersededWhileConnecting(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.ConnectTimeout = 6 * time.Second
	f := startProvider(t, opts)
	hole := blackHole(t)

	f.createSecret("superseded", kubeconfigFor(t, memberB, hole.addr))
	g.Eventually(hole.accepted()).WithTimeout(joinTimeout).WithPolling(interval).Should(BeNumerically(">=", 1))
	hanging := hole.acceptedAt()[0]
	g.Expect(f.state("superseded")()).To(beNotReady(hubv1alpha1.ConnectingReason))

	updated := time.Now()
	f.setKubeconfig("superseded", memberB.Kubeconfig())
	g.Eventually(f.state("superseded")).WithTimeout(opts.ConnectTimeout/2).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason),
		"the member joins well before the hanging attempt times out")
	t.Logf("joined %v after the new kubeconfig", time.Since(updated))
	cl, _ := f.get("superseded")()
	// OnChange reports the join a moment after the state says it: count the changes from there.
	var joined int
	g.Eventually(func(g Gomega) {
		changes := f.history.changesOf("superseded")
		g.Expect(changes).NotTo(BeEmpty())
		g.Expect(changes[len(changes)-1].State.Ready).To(BeTrue())
		joined = len(changes)
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())

	// The hanging attempt fails once ConnectTimeout has passed; nothing changes.
	g.Consistently(func(g Gomega) {
		g.Expect(f.state("superseded")()).To(beReady(hubv1alpha1.ConnectedReason))
		g.Expect(f.get("superseded")()).To(BeIdenticalTo(cl))
	}).WithTimeout(time.Until(hanging.Add(opts.ConnectTimeout + quietPeriod))).WithPolling(interval).Should(Succeed())
	g.Expect(f.history.changesOf("superseded")[joined:]).To(BeEmpty())
	g.Expect(f.engaged.of("superseded")).To(HaveExactElements(HaveField("Ended()", BeFalse())))
}

// TestBackOff: a kubeconfig whose server drops every connection is retried with growing
// delays, capped by RetryMaxDelay; a new kubeconfig does not wait for the back-off.
func TestBackOff(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.ConnectTimeout = 1500 * time.Millisecond
	opts.RetryMaxDelay = 4 * time.Second
	f := startProvider(t, opts)
	door := slammingDoor(t)

	f.createSecret("backoff", kubeconfigFor(t, memberA, door.addr))
	g.Eventually(f.state("backoff")).WithTimeout(joinTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.UnreachableReason))

	// Four attempts, each reaching the server and failing; the delays before the next attempt
	// grow from 2 seconds, doubling, up to RetryMaxDelay.
	wantDelays := []time.Duration{2 * time.Second, 4 * time.Second, opts.RetryMaxDelay}
	var failures []time.Time
	g.Eventually(func() []time.Time {
		failures = failuresOf(f.history.changesOf("backoff"))
		return failures
	}).WithTimeout(30 * time.Second).WithPolling(interval).Should(HaveLen(len(wantDelays) + 1))
	accepts := door.acceptedAt()
	for i := range failures {
		var from time.Time
		if i > 0 {
			from = failures[i-1]
		}
		n := countIn(accepts, from, failures[i])
		t.Logf("attempt %d: %d connections", i+1, n)
		g.Expect(n).To(BeNumerically(">=", 1), "connections of attempt %d", i+1)
	}
	for i, want := range wantDelays {
		delay := firstAfter(accepts, failures[i]).Sub(failures[i])
		t.Logf("delay before attempt %d: %v", i+2, delay)
		g.Expect(delay).To(BeNumerically("~", want+250*time.Millisecond, 300*time.Millisecond), "delay before attempt %d", i+2)
	}

	// A good kubeconfig is connected at once, not after the pending delay.
	updated := time.Now()
	f.setKubeconfig("backoff", memberA.Kubeconfig())
	f.waitReady(g, "backoff")
	g.Expect(time.Since(updated)).To(BeNumerically("<", opts.RetryMaxDelay), "joined after the back-off")
	g.Expect(countAfter(door.acceptedAt(), failures[len(failures)-1])).To(BeZero(), "the old kubeconfig was retried")
}

// failuresOf returns when OnChange told of each failed connection attempt of a member.
func failuresOf(changes []observation) []time.Time {
	var out []time.Time
	for _, o := range changes {
		if !o.State.Ready && o.State.Reason == hubv1alpha1.UnreachableReason {
			out = append(out, o.At)
		}
	}
	return out
}

// firstAfter returns the first of times after from, or the zero time.
func firstAfter(times []time.Time, from time.Time) time.Time {
	for _, at := range times {
		if at.After(from) {
			return at
		}
	}
	return time.Time{}
}

// countIn counts the times in [from, to].
func countIn(times []time.Time, from, to time.Time) int {
	n := 0
	for _, at := range times {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// countAfter counts the times after from.
func countAfter(times []time.Time, from time.Time) int {
	n := 0
	for _, at := range times {
		if at.After(from) {
			n++
		}
	}
	return n
}

// TestDuplicateCluster: a cluster that is already a member is refused under a second name,
// which is retried and joins once the first name left.
func TestDuplicateCluster(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := startProvider(t, testOptions())
	f.createSecret("first", memberA.Kubeconfig())
	f.waitReady(g, "first")

	f.createSecret("second", userKubeconfig(t, memberA, "duplicate-admin"))
	g.Eventually(f.state("second")).WithTimeout(joinTimeout).WithPolling(interval).Should(SatisfyAll(
		beNotReady(hubv1alpha1.DuplicateClusterReason),
		HaveField("Message", ContainSubstring(`"first"`))))
	g.Consistently(func(g Gomega) {
		g.Expect(f.state("first")()).To(beReady(hubv1alpha1.ConnectedReason))
		g.Expect(f.state("second")()).To(HaveField("Ready", BeFalse()))
		g.Expect(f.provider.Connected("second")).To(MatchError(multicluster.ErrClusterNotFound))
		g.Expect(f.engaged.names()).To(Equal([]string{"first"}))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())

	// The first name leaves: the second is retried, after its back-off, and joins.
	g.Expect(hubClient.Delete(t.Context(), memberSecret(f.ns, "first", nil))).To(Succeed())
	g.Eventually(f.known("first")).WithTimeout(joinTimeout).WithPolling(interval).Should(BeFalse())
	cl := f.waitReady(g, "second")
	g.Expect(f.state("second")().ClusterID).To(Equal(clusterID(t, memberA)))
	g.Expect(cl.GetAPIReader().List(t.Context(), &corev1.NamespaceList{})).To(Succeed())
	g.Expect(f.engaged.names()).To(Equal([]string{"first", "second"}))
}

// TestProbeThreshold: a member that stops answering is Unreachable after FailureThreshold
// failed probes, stays engaged, and is Ready again (OnReady) once it answers.
func TestProbeThreshold(t *testing.T) {
	g := NewWithT(t)
	f := startProvider(t, testOptions())
	f.createSecret("probed", memberB.Kubeconfig())
	cl := f.waitReady(g, "probed")
	g.Eventually(func() int { return len(f.history.readiesOf("probed")) }).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal(1))

	g.Expect(memberB.Pause()).To(Succeed())
	t.Cleanup(func() { _ = memberB.Resume() })
	g.Eventually(f.state("probed")).WithTimeout(joinTimeout).WithPolling(interval).Should(SatisfyAll(
		beNotReady(hubv1alpha1.UnreachableReason),
		HaveField("Message", HavePrefix(fmt.Sprintf("%d consecutive health probes failed", failureThreshold)))))
	err := f.provider.Connected("probed")
	g.Expect(err).To(MatchError(spokeprovider.ErrNotConnected))
	g.Expect(errors.Is(err, multicluster.ErrClusterNotFound)).To(BeFalse())
	g.Expect(f.get("probed")()).To(BeIdenticalTo(cl), "an unreachable member stays engaged")

	g.Expect(memberB.Resume()).To(Succeed())
	g.Eventually(f.state("probed")).WithTimeout(joinTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
	g.Expect(f.provider.Connected("probed")).To(Succeed())
	g.Eventually(func() int { return len(f.history.readiesOf("probed")) }).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal(2))
	g.Expect(f.engaged.of("probed")).To(HaveExactElements(SatisfyAll(
		HaveField("Cluster", BeIdenticalTo(cl)), HaveField("Ended()", BeFalse()))), "the same connection recovered")
}

// TestFaultBlipResyncs: a member that misses probes, too few to be Unreachable, stays Ready and
// unreported, but OnReady tells the reconcilers when it answers again: its watches may have
// broken meanwhile.
func TestFaultBlipResyncs(t *testing.T) {
	g := NewWithT(t)
	opts := testOptions()
	opts.FailureThreshold = 1000
	f := startProvider(t, opts)
	f.createSecret("blip", memberB.Kubeconfig())
	f.waitReady(g, "blip")
	// The provider publishes Ready before it engages the member and then calls OnReady.
	g.Eventually(func() int { return len(f.history.readiesOf("blip")) }).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal(1))
	changes := len(f.history.changesOf("blip"))
	notReady := f.watchReadiness("blip")

	g.Expect(memberB.Pause()).To(Succeed())
	t.Cleanup(func() { _ = memberB.Resume() })
	// Unseen for longer than a probe's timeout and interval: at least one probe failed.
	g.Eventually(func() time.Duration { return time.Since(f.state("blip")().LastSeen) }).
		WithTimeout(joinTimeout).WithPolling(interval).Should(BeNumerically(">", probeTimeout+2*probeInterval))
	g.Expect(f.history.readiesOf("blip")).To(HaveLen(1))
	g.Expect(memberB.Resume()).To(Succeed())
	resumed := time.Now()
	g.Eventually(func() int { return len(f.history.readiesOf("blip")) }).WithTimeout(joinTimeout).WithPolling(interval).Should(Equal(2))
	t.Logf("resync asked %v after the member answered again", time.Since(resumed).Round(time.Millisecond))
	g.Expect(notReady()).To(BeEmpty(), "a blip below the threshold is not reported")
	g.Expect(f.history.changesOf("blip")).To(HaveLen(changes), "nothing published changed")
}

// TestRotationWhileUnreachable: a new kubeconfig that fails while the member does not answer
// does not hide that it does not: the member stays Unreachable (RotationFailed means Ready, still
// working with the previous kubeconfig); once it answers again, the failed rotation is reported.
func TestRotationWhileUnreachable(t *testing.T) {
	g := NewWithT(t)
	f := startProvider(t, testOptions())
	f.createSecret("unreachable", memberB.Kubeconfig())
	cl := f.waitReady(g, "unreachable")

	g.Expect(memberB.Pause()).To(Succeed())
	t.Cleanup(func() { _ = memberB.Resume() })
	g.Eventually(f.state("unreachable")).WithTimeout(joinTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.UnreachableReason))
	changes := len(f.history.changesOf("unreachable"))
	f.setKubeconfig("unreachable", kubeconfigFor(t, memberB, closedPort(t)))
	// The new kubeconfig is tried (OnChange: connecting, failed) and retried; nothing else changes.
	g.Eventually(func() int { return len(f.history.changesOf("unreachable")) }).WithTimeout(joinTimeout).WithPolling(interval).Should(
		BeNumerically(">=", changes+2))
	g.Consistently(func(g Gomega) {
		st := f.state("unreachable")()
		g.Expect(st).To(beNotReady(hubv1alpha1.UnreachableReason), "%+v", st)
		g.Expect(f.provider.Connected("unreachable")).To(MatchError(spokeprovider.ErrNotConnected))
		g.Expect(f.get("unreachable")()).To(BeIdenticalTo(cl))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())

	g.Expect(memberB.Resume()).To(Succeed())
	g.Eventually(f.state("unreachable")).WithTimeout(joinTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.RotationFailedReason))
	g.Expect(f.get("unreachable")()).To(BeIdenticalTo(cl))
}

// TestLeave: deleting the Secret, or removing its label, disengages the member and changes
// nothing in it.
func TestLeave(t *testing.T) {
	opts := testOptions()
	opts.CRDs, opts.InstallCRDs = memberCRDs, true // the only write to a member, on join
	f := startProvider(t, opts)

	for _, tc := range []struct {
		name  string
		leave func(g Gomega, name string)
	}{
		{name: "secret-deleted", leave: func(g Gomega, name string) {
			g.Expect(hubClient.Delete(context.Background(), memberSecret(f.ns, name, nil))).To(Succeed())
		}},
		{name: "label-removed", leave: func(_ Gomega, name string) {
			f.updateSecret(name, func(s *corev1.Secret) { delete(s.Labels, hubv1alpha1.DefaultSecretLabel) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ctx := NewWithT(t), t.Context()
			f.createSecret(tc.name, memberA.Kubeconfig())
			f.waitReady(g, tc.name)
			written, err := writtenByHub(ctx, memberA.Config)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(written).To(HaveKey("customresourcedefinitions.apiextensions.k8s.io /"+memberCRDs[0].Name),
				"the provider installed the CRD")
			changes := len(f.history.changesOf(tc.name))

			tc.leave(g, tc.name)
			g.Eventually(f.known(tc.name)).WithTimeout(joinTimeout).WithPolling(interval).Should(BeFalse())
			_, err = f.get(tc.name)()
			g.Expect(err).To(MatchError(multicluster.ErrClusterNotFound))
			g.Expect(f.provider.Connected(multicluster.ClusterName(tc.name))).To(MatchError(multicluster.ErrClusterNotFound))
			g.Eventually(func() []engagement { return f.engaged.of(tc.name) }).WithTimeout(joinTimeout).WithPolling(interval).Should(
				HaveExactElements(HaveField("Ended()", BeTrue())), "the engagement ends")
			// OnChange is called after the member is forgotten and its engagement cancelled: wait for it.
			g.Eventually(func() []observation { return f.history.changesOf(tc.name)[changes:] }).WithTimeout(joinTimeout).
				WithPolling(interval).Should(ContainElement(HaveField("Known", BeFalse())), "OnChange told the member left")

			g.Consistently(func() (map[string]string, error) { return writtenByHub(ctx, memberA.Config) }).
				WithTimeout(quietPeriod).WithPolling(500*time.Millisecond).Should(Equal(written), "the member was changed")
		})
	}
}

// TestRefusedKubeconfig: a kubeconfig that would run a program is refused, nothing connects
// with it, and it is not retried until the Secret holds another kubeconfig.
func TestRefusedKubeconfig(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := startProvider(t, testOptions())
	door := slammingDoor(t)
	exec := editKubeconfig(t, memberA, func(kc *clientcmdapi.Config) {
		kc.Clusters[memberA.Name].Server = "https://" + door.addr
		kc.AuthInfos[memberA.Name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh", Args: []string{"-c", "exit 1"},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}}
	})
	f.createSecret("refused", exec)
	g.Eventually(f.state("refused")).WithTimeout(joinTimeout).WithPolling(interval).Should(beNotReady(hubv1alpha1.ExecPluginNotAllowedReason))
	refused := f.state("refused")()
	// OnChange is called once the provider's lock is released, after the state is set: wait for it.
	g.Eventually(func() []observation { return f.history.changesOf("refused") }).WithTimeout(joinTimeout).WithPolling(interval).
		Should(ContainElement(HaveField("State.Reason", hubv1alpha1.ExecPluginNotAllowedReason)))
	changes := len(f.history.changesOf("refused"))

	steady := func(g Gomega) {
		g.Expect(f.state("refused")()).To(Equal(refused))
		g.Expect(f.history.changesOf("refused")).To(HaveLen(changes))
		g.Expect(door.accepted()()).To(BeZero(), "something connected with the refused kubeconfig")
	}
	g.Consistently(steady).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	// Another event on the Secret, with the same kubeconfig, is no reason to try again.
	f.updateSecret("refused", func(s *corev1.Secret) { s.Annotations = map[string]string{"touched": "true"} })
	g.Consistently(steady).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	g.Expect(f.engaged.names()).To(BeEmpty())

	f.setKubeconfig("refused", memberA.Kubeconfig())
	f.waitReady(g, "refused")
}
