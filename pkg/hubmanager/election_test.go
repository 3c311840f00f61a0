package hubmanager

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/sharding/election"
)

// Bounds of the election tests, generous for a loaded two-core machine.
const (
	electionStartTimeout = 3 * time.Minute
	electionTimeout      = 30 * time.Second
	electionInterval     = 50 * time.Millisecond
	electionLease        = 3 * time.Second
)

// TestLeaseHolderIsTheReplicaID: the leader-election Lease, taken with --leader-elect (through
// client-go's election, as the manager runs it), is held as exactly the replica id, with no
// suffix. (Sharded replicas hold it as a fence of their coordinator, by their replica id:
// pkg/sharding's TestReplicasShareMembersByTheirLeases.)
func TestLeaseHolderIsTheReplicaID(t *testing.T) {
	cp := controlplane.MustStart(t, "hub", electionStartTimeout)
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{name: "leader-elect", opts: Options{LeaderElect: true, ReplicaID: "hub-6d4f8b9c7-x2k9p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ctx := NewWithT(t), t.Context()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "election-"}}
			g.Expect(c.Create(ctx, ns)).To(Succeed())
			opts := tc.opts
			opts.SecretNamespace, opts.LeaseDuration = ns.Name, electionLease
			lock, err := newElection(cp.Config, opts, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lock.Identity()).To(Equal(opts.ReplicaID))

			runCtx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			t.Cleanup(func() {
				cancel()
				wg.Wait()
			})
			timings := election.Of(opts.LeaseDuration)
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: lock, LeaseDuration: timings.LeaseDuration, RenewDeadline: timings.RenewDeadline,
				RetryPeriod: timings.RetryPeriod, ReleaseOnCancel: true,
				Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
			})
			g.Expect(err).NotTo(HaveOccurred())
			wg.Go(func() { le.Run(runCtx) })

			g.Eventually(func(g Gomega) string {
				lease := &coordinationv1.Lease{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: hubv1alpha1.LeaderElectionID}, lease)).To(Succeed())
				return ptr.Deref(lease.Spec.HolderIdentity, "")
			}).WithTimeout(electionTimeout).WithPolling(electionInterval).Should(Equal(opts.ReplicaID))
			g.Eventually(lock.Valid).WithTimeout(electionTimeout).WithPolling(electionInterval).Should(BeTrue(),
				"the replica knows the Lease held as its id for its own")
		})
	}
}
