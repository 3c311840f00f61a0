package configbundle

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"configbundle.dev/hub/api/configbundle/v1alpha1"
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

func TestMemory(t *testing.T) {
	g := NewWithT(t)
	var m memory
	x := request("a", "x")
	m.noteWrite(x, "1")
	m.seen(x)
	g.Expect(m.size("a")).To(BeZero(), "nothing is remembered of a member not engaged")

	m.engage("a")
	m.noteWrite(x, "1")
	g.Expect(m.isOwnWrite(x, "1")).To(BeTrue())
	g.Expect(m.isOwnWrite(x, "2")).To(BeFalse())
	g.Expect(m.isOwnWrite(request("b", "x"), "1")).To(BeFalse(), "members are apart")

	m.seen(x)
	first, ok := m.take(x)
	g.Expect(ok).To(BeTrue())
	g.Expect(first).NotTo(BeZero())
	_, ok = m.take(x)
	g.Expect(ok).To(BeFalse(), "taken once")

	status := v1alpha1.ConfigBundleStatus{Heals: 1}
	m.noteStatus(x, "uid-1", status)
	g.Expect(m.recentStatus(x, "uid-1")).To(Equal(&status))
	g.Expect(m.recentStatus(x, "uid-2")).To(BeNil(), "the status of an earlier bundle of the same name")
	g.Expect(m.recentStatus(x, "uid-1")).To(BeNil(), "and it is forgotten")

	m.noteStatus(request("a", "y"), "uid-y", status)
	g.Expect(m.size("a")).To(Equal(2))
	m.forgetBundle(x)
	g.Expect(m.size("a")).To(Equal(1))
}

func TestMemoryOfAnEngagement(t *testing.T) {
	g := NewWithT(t)
	var m memory
	x := request("a", "x")
	old := m.engage("a")
	m.noteWrite(x, "1")

	// Engaged again (make-before-break): the end of the old engagement forgets nothing of the new.
	current := m.engage("a")
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
	g := NewWithT(t)
	r := &Reconciler{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(r.Engage(ctx, "a", nil)).To(Succeed())
	r.memory.noteWrite(request("a", "x"), "1")
	g.Expect(r.memory.size("a")).To(Equal(1))

	cancel()
	g.Eventually(func() int { return r.memory.size("a") }).WithTimeout(forgetTimeout).WithPolling(10 * time.Millisecond).Should(BeZero())
}
