package election

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/internal/testing/controlplane"
)

// Bounds of the tests, generous for a loaded two-core machine.
const (
	startTimeout = 3 * time.Minute
	timeout      = 30 * time.Second
	interval     = 50 * time.Millisecond
	// leaseDuration is the shortest the hub accepts (sharding.MinLeaseDuration).
	leaseDuration = 3 * time.Second
	// lapseSlack covers a renewal's start before the pause and the polling.
	lapseSlack = time.Second
)

// TestTimings: the holder renews every third of the lease duration, each request bounded by half
// a renew period; the timings client-go accepts (a renew deadline above 1.2 retry periods and
// below the lease duration), a renew deadline that ends when the fence lapses, and requests
// bounded well below it.
func TestTimings(t *testing.T) {
	for _, tc := range []struct {
		lease, retry, request, margin, renewDeadline time.Duration
	}{
		{lease: 3 * time.Second, retry: time.Second, request: 500 * time.Millisecond, margin: 300 * time.Millisecond, renewDeadline: 1700 * time.Millisecond},
		{lease: 6 * time.Second, retry: 2 * time.Second, request: time.Second, margin: 600 * time.Millisecond, renewDeadline: 3400 * time.Millisecond},
		{lease: 15 * time.Second, retry: 5 * time.Second, request: 2500 * time.Millisecond, margin: 1500 * time.Millisecond, renewDeadline: 8500 * time.Millisecond},
		{lease: time.Minute, retry: 20 * time.Second, request: 10 * time.Second, margin: 6 * time.Second, renewDeadline: 34 * time.Second},
	} {
		d := tc.lease
		tm := Of(d)
		g := NewWithT(t)
		g.Expect(tm).To(Equal(Timings{LeaseDuration: d, RetryPeriod: tc.retry, RequestTimeout: tc.request, Margin: tc.margin,
			RenewDeadline: tc.renewDeadline}), "lease %v", d)
		g.Expect(tm.RetryPeriod).To(Equal(d/3), "lease %v: renewed every third of it", d)
		g.Expect(tm.RequestTimeout).To(Equal(tm.RetryPeriod/2), "lease %v: requests bounded by half a renew period", d)
		g.Expect(tm.RenewDeadline+tm.RetryPeriod+tm.Margin).To(Equal(d), "lease %v", d)
		g.Expect(float64(tm.RenewDeadline)).To(BeNumerically(">", leaderelection.JitterFactor*float64(tm.RetryPeriod)), "lease %v", d)
		g.Expect(tm.RenewDeadline).To(BeNumerically("<", d), "lease %v", d)
		g.Expect(tm.RequestTimeout).To(BeNumerically("<=", tm.RenewDeadline/3), "lease %v", d)
		lock, err := NewLock(&rest.Config{Host: "https://127.0.0.1:1"}, "ns", "name", "id", tm, nil)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: tm.LeaseDuration, RenewDeadline: tm.RenewDeadline, RetryPeriod: tm.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		})
		g.Expect(err).NotTo(HaveOccurred(), "lease %v", d)
	}
}

// holder is one Lock under test, campaigning with client-go's leader election as
// controller-runtime's manager does with --leader-elect.
type holder struct {
	lock     *Lock
	timeouts atomic.Int32 // onTimeout calls
	stop     func()       // cancels its election and waits until it ended
}

func startHolder(t *testing.T, cfg *rest.Config, ns, id string) *holder {
	t.Helper()
	return campaign(t, cfg, ns, id, true)
}

// campaign starts a holder; release says whether it releases the Lease when it stops, as a
// process stopped by SIGTERM does, or leaves it held, as one killed does.
func campaign(t *testing.T, cfg *rest.Config, ns, id string, release bool) *holder {
	t.Helper()
	h := &holder{}
	tm := Of(leaseDuration)
	lock, err := NewLock(cfg, ns, "hub", id, tm, func() { h.timeouts.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	h.lock = lock
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil { // campaign again after a loss, until stopped
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: lock, LeaseDuration: tm.LeaseDuration, RenewDeadline: tm.RenewDeadline, RetryPeriod: tm.RetryPeriod, ReleaseOnCancel: release,
				Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
			})
			if err != nil {
				t.Errorf("holder %s: %v", id, err)
				return
			}
			le.Run(ctx)
		}
	})
	var once sync.Once
	h.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(h.stop)
	return h
}

// TestLockLapsesWhenAPIServerPauses: the holder's fence (Valid) lapses within the lease
// duration less the margin of its last renewal when the API server is paused longer than the
// lease, and its timed-out requests say so; one of the candidates holds the Lease again once
// the API server answers, and a holder that stops releases the Lease at once.
func TestLockLapsesWhenAPIServerPauses(t *testing.T) {
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	hub, kube := startHub(t)
	const ns = "election-test"
	g.Expect(kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	a := startHolder(t, hub.Config, ns, "a")
	g.Eventually(a.lock.Valid).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Expect(a.lock.WriteDeadline()).To(BeTemporally(">", time.Now()))
	b := startHolder(t, hub.Config, ns, "b")
	g.Consistently(b.lock.Valid).WithTimeout(2 * leaseDuration).WithPolling(interval).Should(BeFalse())
	g.Expect(b.lock.WriteDeadline()).To(BeZero())

	g.Expect(hub.Pause()).To(Succeed())
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = hub.Resume()
		}
	}()
	g.Eventually(a.lock.Valid).WithTimeout(leaseDuration - Of(leaseDuration).Margin + lapseSlack).WithPolling(interval).Should(BeFalse())
	t.Logf("API server paused → the holder's fence lapsed: %v", time.Since(paused).Round(time.Millisecond))
	g.Eventually(func() int32 { return a.timeouts.Load() + b.timeouts.Load() }).WithTimeout(leaseDuration).WithPolling(interval).Should(BeNumerically(">", 0), "timed-out requests reported")
	g.Expect(hub.Resume()).To(Succeed())
	resumed = true

	g.Eventually(func() bool { return a.lock.Valid() != b.lock.Valid() }).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	leader, other := a, b
	if b.lock.Valid() {
		leader, other = b, a
	}
	leader.stop()
	g.Expect(leader.lock.Valid()).To(BeFalse())
	lease := &coordinationv1.Lease{}
	g.Expect(kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hub"}, lease)).To(Succeed())
	g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(BeEmpty(), "released")
	g.Eventually(other.lock.Valid).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// TestSameIdentityTwoProcesses: a second process campaigning under the identity of the live
// holder never holds the Lease: it finds out that the holder renews it (Duplicate, ErrDuplicate)
// and writes nothing, while the holder keeps it. A process that starts under the identity of a
// holder that was killed (the Lease left held) takes the Lease over once it has gone unrenewed for
// about a lease duration, as it would from another holder; one that starts after a holder that
// stopped and released it takes it at once.
func TestSameIdentityTwoProcesses(t *testing.T) {
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	g, ctx := NewWithT(t), context.Background()
	hub, kube := startHub(t)
	const ns, id = "election-same", "hub-0"
	g.Expect(kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	incarnation := func(g Gomega) string {
		lease := &coordinationv1.Lease{}
		g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hub"}, lease)).To(Succeed())
		g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(Equal(id))
		return lease.Annotations[IncarnationAnnotation]
	}

	first := campaign(t, hub.Config, ns, id, false)
	g.Eventually(first.lock.Valid).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	held := incarnation(g)
	g.Expect(held).NotTo(BeEmpty())

	second := startHolder(t, hub.Config, ns, id)
	g.Eventually(second.lock.Duplicate()).WithTimeout(timeout).WithPolling(interval).Should(BeClosed())
	g.Expect(second.lock.Err()).To(MatchError(ErrDuplicate))
	t.Logf("the second process: %v", second.lock.Err())
	g.Consistently(func(g Gomega) {
		g.Expect(first.lock.Valid()).To(BeTrue())
		g.Expect(second.lock.Valid()).To(BeFalse())
		g.Expect(incarnation(g)).To(Equal(held))
	}).WithTimeout(leaseDuration).WithPolling(interval).Should(Succeed())

	// The holder is killed: the duplicate, which knows another live process has its id, still
	// writes nothing; a new process of the same id waits until the Lease has lapsed.
	first.stop()
	killed := time.Now()
	third := startHolder(t, hub.Config, ns, id)
	g.Eventually(third.lock.Valid).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	waited := time.Since(killed)
	t.Logf("a process of the killed holder's id took the Lease %v after the kill", waited.Round(time.Millisecond))
	g.Expect(waited).To(BeNumerically(">=", leaseDuration-Of(leaseDuration).Margin), "it waited for the Lease to lapse")
	g.Expect(third.lock.Duplicate()).NotTo(BeClosed())
	g.Expect(incarnation(g)).NotTo(Equal(held))
	g.Expect(second.lock.Valid()).To(BeFalse())

	// Stopped, it releases the Lease; the next process of its id takes it at once.
	second.stop()
	third.stop()
	fourth := startHolder(t, hub.Config, ns, id)
	g.Eventually(fourth.lock.Valid).WithTimeout(leaseDuration).WithPolling(interval).Should(BeTrue())
}

// startHub starts a control plane for the Lease, stopped when t ends, and a client of it.
func startHub(t *testing.T) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cp := controlplane.MustStart(t, "hub", startTimeout)
	kube, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cp, kube
}
