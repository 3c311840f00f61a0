package sharded

import (
	"context"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestEveryMemberManagedByExactlyOneReplica: three replicas share twelve members, each member
// held by one replica's Lease and reported by it, and drift is healed in every member.
func TestEveryMemberManagedByExactlyOneReplica(t *testing.T) {
	RegisterTestingT(t)
	own := settledOwners(t, "r0", "r1", "r2")
	for _, id := range []string{"r0", "r1", "r2"} {
		t.Logf("replica %s manages %v", id, membersOf(own, id))
	}
	// The Leases say it too: no member Lease is held by anyone else.
	leases := &coordinationv1.LeaseList{}
	Expect(fl.Hub.List(context.Background(), leases, client.InNamespace(secretNS))).To(Succeed())
	held := 0
	for _, l := range leases.Items {
		for _, m := range names {
			if l.Name == hubv1alpha1.MemberLeasePrefix+"-"+m {
				held++
				Expect(*l.Spec.HolderIdentity).To(Equal(own[m]), "Lease %s", l.Name)
			}
		}
	}
	Expect(held).To(Equal(memberCount))

	from := time.Now()
	for _, m := range names {
		Expect(drift(m, "drifted")).To(Succeed())
	}
	expectHealed(t, names...)
	// Each member's drift was healed by its owner alone.
	for _, h := range healsIn(t, from, time.Now(), "r0", "r1", "r2") {
		Expect(h.replica).To(Equal(own[h.member]), "member %s healed by %s", h.member, h.replica)
	}
}

// TestKilledReplicasMembersAreTakenOver: a replica killed with SIGKILL keeps its Leases until
// they expire; then the others take its members over, and a drift made right after the kill is
// healed within the lease duration and one probe interval.
func TestKilledReplicasMembersAreTakenOver(t *testing.T) {
	RegisterTestingT(t)
	own := settledOwners(t, "r0", "r1", "r2")
	victim := busiest(own)
	lost := membersOf(own, victim)
	t.Cleanup(func() { restore(t, victim) })

	fl.StopHub(victim, syscall.SIGKILL)
	killed := time.Now()
	Expect(drift(lost[0], "drifted right after the kill")).To(Succeed())
	expectHealed(t, lost[0])
	took := time.Since(killed)
	t.Logf("replica %s (members %v) killed: drift in %s healed %s after the kill (bound: lease duration %s + probe interval %s = %s)",
		victim, lost, lost[0], took.Round(time.Millisecond), leaseDuration, probeInterval, takeoverBound)
	alive := others(victim)
	after := settledOwners(t, alive...)
	t.Logf("the new owner %s of %s, from the kill: %v", after[lost[0]], lost[0], timeline(t, after[lost[0]], lost[0], killed))
	Expect(took).To(BeNumerically("<=", takeoverBound), "takeover")
	for _, m := range lost {
		Expect(after[m]).NotTo(Equal(victim))
	}
	t.Logf("members after the takeover: %v", after)
	t.Logf("hand-overs in the members' audit logs, none with two writers: %d", expectOneWriterAtATime(t, names...))
}

// TestAddedReplicaTakesItsShareWithoutDoubleWriters: while drift is made in every member, a
// fourth replica starts; the members it takes are handed over with no moment in which two
// replicas heal one member (the heals of a moved member are the old owner's, then the new one's,
// never interleaved), and every drift is healed.
func TestAddedReplicaTakesItsShareWithoutDoubleWriters(t *testing.T) {
	RegisterTestingT(t)
	before := settledOwners(t, "r0", "r1", "r2")
	from := time.Now()
	d := startDrifting(names, 15*time.Millisecond)
	Expect(startReplica("r3")).To(Succeed())
	t.Cleanup(func() {
		fl.StopHub("r3", syscall.SIGTERM)
		settledOwners(t, "r0", "r1", "r2")
	})
	after := settledOwners(t, "r0", "r1", "r2", "r3")
	moved := membersOf(after, "r3")
	Expect(moved).NotTo(BeEmpty(), "r3 took no member: %v", after)
	// Keep drifting until the new owner healed in each member it took, then let everything heal.
	Eventually(func() []string {
		var waiting []string
		for _, m := range moved {
			if len(healsOf(healsIn(t, from, time.Now(), "r3"), []string{m})) == 0 {
				waiting = append(waiting, m)
			}
		}
		return waiting
	}).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty(), "members r3 took and has not healed yet")
	drifts := d.Stop()
	expectHealed(t, names...)
	to := time.Now()

	heals := healsIn(t, from, to, "r0", "r1", "r2", "r3")
	t.Logf("r3 took %v; %d drifts, %d heals during the hand-over", moved, drifts, len(heals))
	for _, m := range names {
		var seq []string
		for _, h := range heals {
			if h.member == m && (len(seq) == 0 || seq[len(seq)-1] != h.replica) {
				seq = append(seq, h.replica)
			}
		}
		want := []string{before[m]}
		if after[m] != before[m] {
			want = append(want, after[m])
		}
		Expect(seq).To(Or(Equal(want), Equal(want[len(want)-1:])), "member %s: the replicas that healed it, in order", m)
	}
	t.Logf("hand-overs in the members' audit logs, none with two writers: %d", expectOneWriterAtATime(t, names...))
}

// TestPausedReplicaIsFencedOff: a replica stopped with SIGSTOP still holds its Leases, but once
// they expire its members are taken over; when it wakes it writes nothing to them until it holds
// their Lease again.
func TestPausedReplicaIsFencedOff(t *testing.T) {
	RegisterTestingT(t)
	own := settledOwners(t, "r0", "r1", "r2")
	victim := busiest(own)
	lost := membersOf(own, victim)
	alive := others(victim)

	signalReplica(t, victim, syscall.SIGSTOP)
	paused := time.Now()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			signalReplica(t, victim, syscall.SIGCONT)
		}
	})
	taken := settledOwners(t, alive...)
	t.Logf("replica %s paused; its members %v taken over in %s: %v", victim, lost, time.Since(paused).Round(time.Millisecond), taken)

	// Drift its members while it sleeps and after it wakes: it must not heal any of them
	// before it holds its Lease again.
	d := startDrifting(lost, 20*time.Millisecond)
	Eventually(func() int { return len(healsOf(healsIn(t, paused, time.Now(), alive...), lost)) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeNumerically(">=", len(lost)))
	signalReplica(t, victim, syscall.SIGCONT)
	resumed = true
	woke := time.Now()
	// Awake, it is live again and gets its share back, through the Leases.
	back := settledOwners(t, "r0", "r1", "r2")
	d.Stop()
	expectHealed(t, lost...)

	for _, m := range lost {
		lease := &coordinationv1.Lease{}
		Expect(fl.Hub.Get(context.Background(), client.ObjectKey{Namespace: secretNS, Name: hubv1alpha1.MemberLeasePrefix + "-" + m}, lease)).To(Succeed())
		reacquired := lease.Spec.AcquireTime.Time
		for _, h := range healsOf(healsIn(t, woke, time.Now(), victim), []string{m}) {
			Expect(back[m]).To(Equal(victim), "member %s healed by %s, which does not hold it", m, victim)
			Expect(h.at).To(BeTemporally(">=", reacquired), "member %s healed by %s at %s, before it took its Lease back at %s",
				m, victim, h.at.Format(time.StampMicro), reacquired.Format(time.StampMicro))
		}
		// The member's audit log says it too, by user agent: nothing the woken replica sent
		// reached the member before it held the member's Lease again.
		for _, w := range replicaWrites(t, m, victim) {
			if w.Received.Before(paused) {
				continue
			}
			Expect(back[m]).To(Equal(victim), "member %s written by %s after the pause, which does not hold it: %s %s/%s at %s",
				m, victim, w.Verb, w.Resource, w.Name, w.Received.Format(time.StampMicro))
			Expect(w.Received).To(BeTemporally(">=", reacquired), "member %s: %s's write %s %s/%s received at %s, before it took its Lease back at %s",
				m, victim, w.Verb, w.Resource, w.Name, w.Received.Format(time.StampMicro), reacquired.Format(time.StampMicro))
		}
	}
	t.Logf("hand-overs in the members' audit logs, none with two writers: %d", expectOneWriterAtATime(t, names...))
	refused := countLines(t, victim, "does not hold the Lease")
	t.Logf("replica %s woke %s after the pause; writes it refused itself: %d", victim, woke.Sub(paused).Round(time.Millisecond), refused)
}

// busiest returns the replica managing the most members (the first by name among equals).
func busiest(own map[string]string) string {
	best, n := "", -1
	for _, id := range []string{"r0", "r1", "r2"} {
		if k := len(membersOf(own, id)); k > n {
			best, n = id, k
		}
	}
	return best
}

// others returns r0..r2 but id.
func others(id string) []string {
	var out []string
	for _, r := range []string{"r0", "r1", "r2"} {
		if r != id {
			out = append(out, r)
		}
	}
	return out
}

// restore starts replica id again and waits until the fleet is settled on r0..r2.
func restore(t *testing.T, id string) {
	t.Helper()
	if err := startReplica(id); err != nil {
		t.Fatal(err)
	}
	settledOwners(t, "r0", "r1", "r2")
}

// healsOf keeps the heals of the members.
func healsOf(heals []heal, members []string) []heal {
	var out []heal
	for _, h := range heals {
		for _, m := range members {
			if h.member == m {
				out = append(out, h)
			}
		}
	}
	return out
}

// TestStoppedReplicaHandsOverAtOnce: a replica stopped cleanly (SIGTERM, as in a rollout)
// releases its Leases on the way out, so its members are taken over at the others' next look,
// well within the lease duration a crash costs.
func TestStoppedReplicaHandsOverAtOnce(t *testing.T) {
	RegisterTestingT(t)
	own := settledOwners(t, "r0", "r1", "r2")
	victim := busiest(own)
	t.Cleanup(func() { restore(t, victim) })

	fl.StopHub(victim, syscall.SIGTERM)
	stopped := time.Now()
	Eventually(func(g Gomega) { owners(g, others(victim)...) }).
		WithTimeout(leaseDuration*2/3).WithPolling(interval).Should(Succeed(), "members of %s taken over", victim)
	t.Logf("replica %s stopped: its members %v taken over %s after it exited (lease duration %s)",
		victim, membersOf(own, victim), time.Since(stopped).Round(time.Millisecond), leaseDuration)
}
