package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/namespace"

	"configbundle.dev/hub/pkg/sharding/peers"
)

// awareRunnable is a multicluster runnable that records the clusters it is engaged with.
type awareRunnable struct{ *engagedAware }

func (awareRunnable) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// TestFencesThroughTheManager: plugged into a multicluster manager with mcmanager.WithCoordinator
// (namespaces as clusters), the coordinator takes a fence per cluster, engages the manager's
// runnables with each only once it holds it, and releases every fence when the manager stops.
func TestFencesThroughTheManager(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	clusters := []string{ns + "-zoo", ns + "-jungle", ns + "-island"}
	for _, n := range clusters {
		g.Expect(kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	}

	host, err := cluster.New(hub.Config, func(o *cluster.Options) { o.Scheme = scheme })
	g.Expect(err).NotTo(HaveOccurred())
	const lease, renew = 3 * time.Second, time.Second
	registry := peers.NewLeaseRegistry(kube, ns, "peer", selfID, 1, logr.Discard(), peers.WithLeaseTimings(lease, renew), peers.WithRefreshInterval(100*time.Millisecond))
	coord := New(kube, logr.Discard(),
		WithPeerRegistry(registry),
		WithShardLease(ns, "shard"),
		WithPerClusterLease(true),
		WithLeaseTimings(lease, renew, 100*time.Millisecond),
		WithSynchronizationIntervals(100*time.Millisecond, lease),
	)
	mgr, err := mcmanager.New(hub.Config, namespace.New(host), manager.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}},
		mcmanager.WithCoordinator(coord))
	g.Expect(err).NotTo(HaveOccurred())
	r := awareRunnable{newEngagedAware()}
	g.Expect(mgr.Add(r)).To(Succeed())
	g.Expect(mgr.GetLocalManager().Add(host)).To(Succeed())

	mgrCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(mgrCtx); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	defer func() {
		stop()
		wg.Wait()
	}()

	for _, n := range clusters {
		g.Eventually(func(g Gomega) {
			ls, err := getLease(ctx, ns, "shard-"+n)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ls.Spec.HolderIdentity).To(HaveValue(Equal(selfID)))
			g.Expect(r.engagements(multicluster.ClusterName(n))).To(HaveLen(1), "engaged once its fence is held")
			g.Expect(mayWrite(coord, multicluster.ClusterName(n))()).To(BeTrue())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "cluster %s", n)
	}

	stop()
	wg.Wait()
	for _, n := range clusters {
		ls, err := getLease(ctx, ns, "shard-"+n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ls.Spec.HolderIdentity).To(HaveValue(BeEmpty()), "cluster %s: released on a clean stop", n)
		g.Expect(r.engagements(multicluster.ClusterName(n))[0].Done()).To(BeClosed())
	}
	peer, err := getLease(ctx, ns, "peer-"+selfID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer.Spec.HolderIdentity).To(HaveValue(BeEmpty()), "the peer Lease released last")
}
