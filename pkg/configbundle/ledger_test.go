package configbundle

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// forgetTimeout bounds the wait for an ended engagement to be forgotten (context.AfterFunc runs
// in a goroutine of its own).
const forgetTimeout = 5 * time.Second

func request(cluster, name string) mcreconcile.Request {
	return mcreconcile.Request{
		Request:     reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}},
		ClusterName: multicluster.ClusterName(cluster),
	}
}

func TestLedger(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	var m ledger
	x := request("a", "x")
	m.noteWrite(x, "1")
	m.noteSeen(x)
	g.Expect(m.size("a")).To(BeZero(), "nothing is remembered of a member not engaged")

	m.engage("a", nil)
	m.noteWrite(x, "1")
	g.Expect(m.isOwnWrite(x, "1")).To(BeTrue())
	g.Expect(m.isOwnWrite(x, "2")).To(BeFalse())
	g.Expect(m.isOwnWrite(request("b", "x"), "1")).To(BeFalse(), "members are apart")

	m.noteSeen(x)
	first, ok := m.takeSeen(x)
	g.Expect(ok).To(BeTrue())
	g.Expect(first).NotTo(BeZero())
	_, ok = m.takeSeen(x)
	g.Expect(ok).To(BeFalse(), "taken once")

	status := configbundlev1alpha1.ConfigBundleStatus{Heals: 1}
	m.noteStatus(x, "uid-1", status)
	g.Expect(m.recentStatus(x, "uid-1")).To(Equal(&status))
	g.Expect(m.recentStatus(x, "uid-2")).To(BeNil(), "the status of an earlier bundle of the same name")
	g.Expect(m.recentStatus(x, "uid-1")).To(BeNil(), "and it is forgotten")

	m.noteStatus(request("a", "y"), "uid-y", status)
	g.Expect(m.size("a")).To(Equal(2))
	m.forgetBundle(x)
	g.Expect(m.size("a")).To(Equal(1))
}

func TestLedgerOfAnEngagement(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	var m ledger
	x := request("a", "x")
	old := m.engage("a", nil)
	m.noteWrite(x, "1")

	// Engaged again (make-before-break): the end of the old engagement forgets nothing of the new.
	current := m.engage("a", nil)
	g.Expect(m.size("a")).To(BeZero(), "a new engagement starts afresh")
	m.noteWrite(x, "2")
	m.forgetCluster("a", old)
	g.Expect(m.isOwnWrite(x, "2")).To(BeTrue())

	m.forgetCluster("a", current)
	g.Expect(m.size("a")).To(BeZero())
	m.noteWrite(x, "3")
	g.Expect(m.size("a")).To(BeZero(), "a reconcile still running when its member left leaves nothing behind")
}

func TestEngageForgetsWhenTheEngagementEnds(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	r := &Reconciler{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.engage(ctx, "a", nil)
	r.ledger.noteWrite(request("a", "x"), "1")
	g.Expect(r.ledger.size("a")).To(Equal(1))

	cancel()
	g.Eventually(func() int { return r.ledger.size("a") }).WithTimeout(forgetTimeout).WithPolling(10 * time.Millisecond).Should(BeZero())
}

func TestLedgerOfTheFirstFullReconcile(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	var m ledger
	x, y := request("a", "x"), request("a", "y")
	g.Expect(m.sync("a")).To(Equal(Sync{}), "not connected")

	e := m.engage("a", map[types.NamespacedName]struct{}{x.NamespacedName: {}, y.NamespacedName: {}})
	g.Expect(m.sync("a")).To(Equal(Sync{Connected: true, Total: 2, Left: 2}))
	m.noteRecorded(x)
	m.noteRecorded(x)
	m.noteRecorded(request("b", "y"))
	m.noteRecorded(request("a", "new"))
	g.Expect(m.sync("a")).To(Equal(Sync{Connected: true, Total: 2, Left: 1}), "each bundle it held counts once, in its member only")
	m.noteRecorded(y)
	g.Expect(m.sync("a").Synced()).To(BeTrue())

	m.forgetCluster("a", e)
	g.Expect(m.sync("a")).To(Equal(Sync{}), "forgotten when the member leaves")
	g.Expect(m.engage("a", nil)).NotTo(BeNil())
	g.Expect(m.sync("a").Synced()).To(BeTrue(), "a member that held nothing is synced as it connects")
}

func TestLedgerOfHealsAndLiveReads(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	var m ledger
	m.engage("a", nil)
	x := request("a", "x")

	m.observe(x, "uid-1")
	m.noteWrite(x, "5")
	g.Expect(m.wrote(x)).To(BeTrue())
	g.Expect(m.lagsOwnWrite(x, "4")).To(BeTrue(), "the cache has not caught up with the write")
	g.Expect(m.lagsOwnWrite(x, "5")).To(BeFalse())

	at := time.Now()
	m.noteHeal(x, at.Add(-time.Second), []string{"data"})
	m.noteHeal(x, at, []string{"labels"})
	g.Expect(m.unrecordedHeals(x)).To(Equal(unrecordedHeals{count: 2, first: at.Add(-time.Second), last: at}))
	m.noteHeal(x, at.Add(time.Second), []string{"data"})
	m.noteHealsRecorded(x, 2)
	g.Expect(m.unrecordedHeals(x)).To(Equal(unrecordedHeals{count: 1, first: at.Add(time.Second), last: at.Add(time.Second)}),
		"a heal made while the status was written waits for the next")
	m.noteHealsRecorded(x, 1)
	g.Expect(m.unrecordedHeals(x)).To(BeZero(), "a written status counts them")

	m.noteVerifyLive(x)
	g.Expect(m.takeVerifyLive(x)).To(BeTrue())
	g.Expect(m.takeVerifyLive(x)).To(BeFalse(), "once")

	m.noteLiveRead(x, "7")
	g.Expect(m.cacheLagsBundle(x, "6")).To(BeTrue())
	m.noteBundleWrite(x, "8")
	g.Expect(m.cacheLagsBundle(x, "7")).To(BeTrue(), "the live read was followed by a write")
	g.Expect(m.cacheLagsBundle(x, "8")).To(BeFalse())
	g.Expect(m.cacheLagsBundle(x, "6")).To(BeFalse(), "forgotten once the cache caught up")
	m.noteBundleWrite(x, "9")
	g.Expect(m.cacheLagsBundle(x, "6")).To(BeFalse(), "writes are followed only after a live read")

	ready := &metav1.Condition{Type: configbundlev1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: configbundlev1alpha1.CreateFailedReason}
	m.noteUnreported(x, ready)
	g.Expect(m.unreported("a")).To(Equal(map[types.NamespacedName]metav1.Condition{x.NamespacedName: *ready}))
	m.noteUnreported(x, nil)
	g.Expect(m.unreported("a")).To(BeEmpty())

	// A new bundle of the same name starts afresh, but keeps the change that woke it.
	m.noteHeal(x, at, []string{"data"})
	m.noteSeen(x)
	m.observe(x, "uid-2")
	g.Expect(m.wrote(x)).To(BeFalse())
	g.Expect(m.unrecordedHeals(x)).To(BeZero())
	_, seen := m.takeSeen(x)
	g.Expect(seen).To(BeTrue())
}

func TestFight(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	var f fight
	start := time.Now()
	heal := func(i int, drift ...string) *fightReport {
		return f.heal(start.Add(time.Duration(i)*time.Second), drift)
	}

	for i := range FightHeals - 1 {
		g.Expect(heal(i, "data")).To(BeNil(), "heal %d is no fight yet", i)
	}
	report := heal(FightHeals-1, "labels")
	g.Expect(report).To(Equal(&fightReport{drift: []string{"data", "labels"}, within: time.Duration(FightHeals-1) * time.Second}))
	g.Expect(heal(FightHeals, "data")).To(BeNil(), "reported once per fight")

	// Quiet for a whole window: the next fight is reported again.
	next := FightHeals + int(FightWindow/time.Second) + 1
	for i := range FightHeals - 1 {
		g.Expect(heal(next+i, "annotations")).To(BeNil())
	}
	g.Expect(heal(next+FightHeals-1, "annotations")).To(Equal(&fightReport{drift: []string{"annotations"}, within: time.Duration(FightHeals-1) * time.Second}))

	// Heals spread wider than the window make no fight.
	f = fight{}
	step := int(FightWindow/time.Second) / (FightHeals - 2)
	for i := range 3 * FightHeals {
		g.Expect(heal(i*step, "data")).To(BeNil(), "heal %d", i)
	}
}
