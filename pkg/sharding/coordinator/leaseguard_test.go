package coordinator

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	fenceName = "shard-default"
	selfID    = "peer-0"
	otherID   = "peer-1"
)

// never judges no peer dead.
func never(string, time.Time) bool { return false }

// otherLease is a fence named fenceName held by otherID, last renewed renewedAgo ago, advertising
// duration.
func otherLease(ns string, renewedAgo, duration time.Duration) *coordinationv1.Lease {
	renew := metav1.NewMicroTime(time.Now().Add(-renewedAgo))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fenceName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(otherID),
			LeaseDurationSeconds: ptr.To(int32(duration / time.Second)),
			RenewTime:            &renew,
			AcquireTime:          &renew,
		},
	}
}

// TestTakeCreatesThenReleaseClearsHolder: a free fence is created naming this peer, held in the
// epoch it was taken in only, and released by clearing its holder. Upstream checked that the
// Lease advertised the guard's lease duration and was renewed; a fence now advertises one year
// and is never renewed: it is valid while its holder's peer Lease is, so taking it again in a
// new epoch rewrites it (that is what makes it that epoch's) and voids it in the earlier one.
func TestTakeCreatesThenReleaseClearsHolder(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	guard := newLeaseGuard(kube, ns, fenceName, selfID)

	ok, holder, err := guard.take(ctx, 1, never)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(holder).To(BeEmpty())
	g.Expect(guard.heldIn(1)).To(BeTrue())
	g.Expect(guard.claimed()).To(BeTrue())
	ls, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ls.Spec.HolderIdentity).To(HaveValue(Equal(selfID)))
	g.Expect(ls.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(fenceDuration / time.Second)))

	ok, _, err = guard.take(ctx, 2, never)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "taken again in a new epoch")
	g.Expect(guard.heldIn(2)).To(BeTrue())
	g.Expect(guard.heldIn(1)).To(BeFalse(), "void in the earlier epoch")
	again, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.ResourceVersion).NotTo(Equal(ls.ResourceVersion), "rewritten in the new epoch")

	guard.forget()
	g.Expect(guard.heldIn(2)).To(BeFalse())
	guard.Release(ctx)
	g.Expect(guard.claimed()).To(BeFalse())
	ls, err = getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ls.Spec.HolderIdentity).To(HaveValue(BeEmpty()), "released")
}

// TestTakeRefusedWhileHolderLive: a fence another live peer holds is not taken, whatever its
// RenewTime says, and is left as it is.
func TestTakeRefusedWhileHolderLive(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	g.Expect(kube.Create(ctx, otherLease(ns, time.Hour, fenceDuration))).To(Succeed())
	before, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())

	guard := newLeaseGuard(kube, ns, fenceName, selfID)
	ok, holder, err := guard.take(ctx, 1, never)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	g.Expect(holder).To(Equal(otherID))
	g.Expect(guard.heldIn(1)).To(BeFalse())
	g.Expect(guard.claimed()).To(BeFalse())
	after, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
}

// TestTakeFromDeadHolderWaitsForALaterList: upstream adopted a fence as soon as its RenewTime
// was older than its duration. A fence is now taken from a dead holder only once a list of the
// peers that started after the fence was read still judges the holder dead: a verdict older
// than the read says nothing of what the holder did since (it may have come back and taken
// the fence again).
func TestTakeFromDeadHolderWaitsForALaterList(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	g.Expect(kube.Create(ctx, otherLease(ns, time.Hour, fenceDuration))).To(Succeed())

	var mu sync.Mutex
	listed := time.Now() // the last list of the peers started here, and judged otherID dead
	dead := func(id string, after time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		return id == otherID && listed.After(after)
	}
	guard := newLeaseGuard(kube, ns, fenceName, selfID)
	ok, holder, err := guard.take(ctx, 1, dead)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "dead by a list older than the read")
	g.Expect(holder).To(Equal(otherID))
	g.Expect(guard.hasPending()).To(BeTrue())
	ok, _, err = guard.take(ctx, 1, dead)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "still no list after the read")

	mu.Lock()
	listed = time.Now()
	mu.Unlock()
	ok, _, err = guard.take(ctx, 1, dead)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "dead by a list that started after the read")
	g.Expect(guard.heldIn(1)).To(BeTrue())
	ls, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ls.Spec.HolderIdentity).To(HaveValue(Equal(selfID)))
	g.Expect(ls.Spec.LeaseTransitions).To(HaveValue(BeEquivalentTo(1)))
}

// TestTakeWritesNothingTheHolderChangedSinceTheRead: a fence read naming a dead holder, which
// the holder then took again, is not overwritten: the write carries the resourceVersion read,
// fails, and the fence is read again at the next try.
func TestTakeWritesNothingTheHolderChangedSinceTheRead(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	g.Expect(kube.Create(ctx, otherLease(ns, time.Hour, fenceDuration))).To(Succeed())
	always := func(id string, _ time.Time) bool { return id == otherID }
	guard := newLeaseGuard(kube, ns, fenceName, selfID)
	ok, _, err := guard.take(ctx, 1, always)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	g.Expect(guard.hasPending()).To(BeTrue())

	ls, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	ls.Spec.AcquireTime = ptr.To(metav1.NowMicro()) // the holder is back and takes it again
	g.Expect(kube.Update(ctx, ls)).To(Succeed())

	ok, _, err = guard.take(ctx, 1, always)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
	g.Expect(ok).To(BeFalse())
	g.Expect(guard.heldIn(1)).To(BeFalse())
	g.Expect(guard.hasPending()).To(BeFalse(), "read again at the next try")
	after, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Spec.HolderIdentity).To(HaveValue(Equal(otherID)))
}

// TestReleaseLeavesOthersFences: upstream's guard noticed a lost Lease in its renew loop and
// released it; a fence is not renewed any more, and a release clears the holder only while
// the fence names this peer: a guard never taken, or one whose fence another peer holds now,
// writes nothing, and is not claimed afterwards.
func TestReleaseLeavesOthersFences(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	guard := newLeaseGuard(kube, ns, fenceName, selfID)
	guard.Release(ctx)
	_, err := getLease(ctx, ns, fenceName)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a release creates nothing: %v", err)
	g.Expect(guard.claimed()).To(BeFalse())

	g.Expect(kube.Create(ctx, otherLease(ns, 0, fenceDuration))).To(Succeed())
	before, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	guard.Release(ctx)
	after, err := getLease(ctx, ns, fenceName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
	g.Expect(guard.claimed()).To(BeFalse())
}

// TestRenewedLately: a fence of a peer of an earlier version (any duration but one year) is
// taken only once it is also expired by its own rule, its RenewTime plus its duration, so that
// a rolling upgrade never makes two writers.
func TestRenewedLately(t *testing.T) {
	now := metav1.NowMicro()
	for _, tc := range []struct {
		name      string
		renewedAt time.Duration // before now
		duration  time.Duration
		want      bool
	}{
		{name: "earlier version, renewed within its duration", renewedAt: time.Second, duration: 5 * time.Second, want: true},
		{name: "earlier version, expired", renewedAt: 30 * time.Second, duration: 5 * time.Second, want: false},
		{name: "this version, never renewed", renewedAt: time.Second, duration: fenceDuration, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := otherLease("ns", 0, tc.duration)
			ls.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(-tc.renewedAt)))
			if got := renewedLately(ls, now); got != tc.want {
				t.Errorf("renewedLately = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOldVersionFenceTakenOnceExpired: a dead holder's fence written by an earlier version is
// not taken while its RenewTime says it is valid.
func TestOldVersionFenceTakenOnceExpired(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	g.Expect(kube.Create(ctx, otherLease(ns, 0, time.Hour))).To(Succeed())
	always := func(id string, _ time.Time) bool { return id == otherID }
	guard := newLeaseGuard(kube, ns, fenceName, selfID)
	for range 2 {
		ok, holder, err := guard.take(ctx, 1, always)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		g.Expect(holder).To(Equal(otherID))
		g.Expect(guard.hasPending()).To(BeFalse(), "valid by its own rule: not even pending")
	}
}
