package fairqueue

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// How long a test waits for the queue's goroutines (a delayed item made ready, a blocked Get
// woken).
const asyncTimeout = 5 * time.Second

// memberOf is the member of the test items, "member/name".
func memberOf(item string) string {
	member, _, _ := strings.Cut(item, "/")
	return member
}

// step is one step of a table test: what is Done, what is added (at low priority, then at 0),
// the items Get hands out next, in order, and whether no more may be handed out then.
type step struct {
	done, addLow, add []string
	get               []string
	thenNone          bool
}

func TestOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cap   int
		steps []step
	}{{
		name: "one member: first in, first out",
		steps: []step{
			{add: []string{"a/1", "a/2", "a/3"}, get: []string{"a/1", "a/2", "a/3"}, thenNone: true},
		},
	}, {
		name: "round robin across members, whatever the order of adds",
		steps: []step{
			{add: []string{"a/1", "a/2", "a/3", "a/4", "b/1", "b/2", "c/1"}, get: []string{"a/1", "b/1", "c/1", "a/2", "b/2", "a/3", "a/4"}, thenNone: true},
		},
	}, {
		name: "the member with the fewest in flight first",
		steps: []step{
			{add: []string{"a/1", "a/2", "a/3"}, get: []string{"a/1", "a/2"}},
			{add: []string{"b/1", "b/2"}, get: []string{"b/1", "b/2", "a/3"}, thenNone: true},
		},
	}, {
		name: "a quiet member's item goes before a backlog that came first",
		steps: []step{
			{add: []string{"big/1", "big/2", "big/3", "big/4", "big/5", "big/6"}, get: []string{"big/1", "big/2", "big/3"}},
			{add: []string{"quiet/heal"}, get: []string{"quiet/heal", "big/4"}},
		},
	}, {
		name: "low priority (an initial list) behind the member's own heals, and behind other members",
		steps: []step{
			{addLow: []string{"a/list1", "a/list2", "b/list1"}, add: []string{"a/heal"}, get: []string{"a/heal", "b/list1", "a/list1", "a/list2"}, thenNone: true},
		},
	}, {
		name: "a raised priority goes behind the items already at that priority",
		steps: []step{
			{add: []string{"a/1"}, addLow: []string{"a/2", "a/3"}},
			{add: []string{"a/3"}, get: []string{"a/1", "a/3", "a/2"}, thenNone: true},
		},
	}, {
		name: "the cap holds a member back, even with workers free",
		cap:  2,
		steps: []step{
			{add: []string{"a/1", "a/2", "a/3", "b/1"}, get: []string{"a/1", "b/1", "a/2"}, thenNone: true},
			{done: []string{"a/1"}, get: []string{"a/3"}, thenNone: true},
		},
	}, {
		name: "deduplicated while queued",
		steps: []step{
			{add: []string{"a/1", "a/1", "a/2", "a/1"}, get: []string{"a/1", "a/2"}, thenNone: true},
		},
	}, {
		name: "an item in flight is not handed out again before Done, then it is",
		steps: []step{
			{add: []string{"a/1"}, get: []string{"a/1"}},
			{add: []string{"a/1", "a/1"}, thenNone: true},
			{done: []string{"a/1"}, get: []string{"a/1"}, thenNone: true},
			{done: []string{"a/1"}, thenNone: true},
		},
	}, {
		name: "Done of an item not in flight changes nothing",
		steps: []step{
			{done: []string{"a/1"}, add: []string{"a/1"}, get: []string{"a/1"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := New(Options[string]{MemberOf: memberOf, MaxInFlightPerMember: tc.cap})
			defer q.ShutDown()
			for i, s := range tc.steps {
				for _, item := range s.done {
					q.Done(item)
				}
				q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, s.addLow...)
				q.AddWithOpts(priorityqueue.AddOpts{}, s.add...)
				var got []string
				for range s.get {
					item, _ := tryGet(q)
					got = append(got, item)
				}
				if !slices.Equal(got, s.get) {
					t.Fatalf("step %d: handed out %q, want %q", i, got, s.get)
				}
				if !s.thenNone {
					continue
				}
				if item, ok := tryGet(q); ok {
					t.Fatalf("step %d: handed out %q, want none", i, item)
				}
			}
		})
	}
}

// tryGet is Get that does not wait: false if no item may be handed out now.
func tryGet(q *Queue[string]) (string, bool) {
	q.lock.Lock()
	defer q.lock.Unlock()
	m := q.nextMemberLocked()
	if m == nil || q.shutdown {
		return "", false
	}
	return q.handOutLocked(m).item, true
}

func TestDelayedItems(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Now())
	q := New(Options[string]{MemberOf: memberOf, Clock: fc})
	defer q.ShutDown()

	q.AddAfter("a/late", 2*time.Second)
	q.AddAfter("a/soon", time.Second)
	q.AddAfter("a/now", 0)
	if item, _ := tryGet(q); item != "a/now" {
		t.Fatalf("handed out %q, want a/now", item)
	}
	if item, ok := tryGet(q); ok {
		t.Fatalf("handed out %q before it was due", item)
	}

	advance(fc, q, time.Second)
	if item := waitGet(t, q); item != "a/soon" {
		t.Fatalf("handed out %q, want a/soon", item)
	}

	// Added again without a delay: ready at once, the earliest of its ready times.
	q.Add("a/late")
	if item, _ := tryGet(q); item != "a/late" {
		t.Fatalf("handed out %q, want a/late", item)
	}

	// Added again while in flight with a delay, then Done: due after the delay, not before.
	q.AddAfter("a/late", time.Second)
	q.Done("a/late")
	if item, ok := tryGet(q); ok {
		t.Fatalf("handed out %q before it was due", item)
	}
	advance(fc, q, time.Second)
	if item := waitGet(t, q); item != "a/late" {
		t.Fatalf("handed out %q, want a/late", item)
	}
}

func TestRateLimited(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Now())
	q := New(Options[string]{MemberOf: memberOf, Clock: fc})
	defer q.ShutDown()

	q.AddRateLimited("a/1")
	q.AddRateLimited("a/1")
	if got := q.NumRequeues("a/1"); got != 2 {
		t.Fatalf("NumRequeues = %d, want 2", got)
	}
	if item, ok := tryGet(q); ok {
		t.Fatalf("handed out %q before its backoff", item)
	}
	advance(fc, q, 5*time.Millisecond) // the first backoff: the earliest ready time wins
	if item := waitGet(t, q); item != "a/1" {
		t.Fatalf("handed out %q, want a/1", item)
	}
	q.Forget("a/1")
	if got := q.NumRequeues("a/1"); got != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", got)
	}
}

// advance steps the fake clock by d and wakes the queue's goroutine that moves due items, which
// may have set its timer on the time before the step.
func advance(fc *clocktesting.FakeClock, q *Queue[string], d time.Duration) {
	fc.Step(d)
	q.notifyWaitingChanged()
}

// waitGet is Get, failing the test if no item comes within asyncTimeout.
func waitGet(t *testing.T, q *Queue[string]) string {
	t.Helper()
	for deadline := time.Now().Add(asyncTimeout); time.Now().Before(deadline); runtime.Gosched() {
		if item, ok := tryGet(q); ok {
			return item
		}
	}
	t.Fatalf("no item within %s", asyncTimeout)
	return ""
}

func TestShutDown(t *testing.T) {
	t.Parallel()
	q := New(Options[string]{MemberOf: memberOf})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if item, shutdown := q.Get(); !shutdown {
				t.Errorf("Get handed out %q after ShutDown", item)
			}
		})
	}
	q.ShutDown()
	q.ShutDown() // twice is fine
	wg.Wait()

	q.Add("a/1")
	if q.Len() != 0 || !q.ShuttingDown() {
		t.Fatalf("after ShutDown: Len %d, ShuttingDown %t; want 0, true", q.Len(), q.ShuttingDown())
	}
}

func TestShutDownWithDrainWaitsForItemsInFlight(t *testing.T) {
	t.Parallel()
	q := New(Options[string]{MemberOf: memberOf})
	q.Add("a/1")
	if item, _ := q.Get(); item != "a/1" {
		t.Fatalf("handed out %q, want a/1", item)
	}
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned with an item in flight")
	case <-time.After(100 * time.Millisecond): // long enough to have returned wrongly
	}
	q.Done("a/1")
	select {
	case <-drained:
	case <-time.After(asyncTimeout):
		t.Fatalf("ShutDownWithDrain still waiting %s after the last Done", asyncTimeout)
	}
}

func TestGetWaitsForAnItem(t *testing.T) {
	t.Parallel()
	q := New(Options[string]{MemberOf: memberOf, MaxInFlightPerMember: 1})
	defer q.ShutDown()
	q.Add("a/1")
	q.Add("a/2")
	if item, _ := q.Get(); item != "a/1" {
		t.Fatalf("handed out %q, want a/1", item)
	}
	got := make(chan string)
	go func() {
		item, _ := q.Get() // held back by the cap until a/1 is Done
		got <- item
	}()
	q.Done("a/1")
	select {
	case item := <-got:
		if item != "a/2" {
			t.Fatalf("handed out %q, want a/2", item)
		}
	case <-time.After(asyncTimeout):
		t.Fatalf("Get still waiting %s after the cap freed", asyncTimeout)
	}
}

// memberMetrics records what a Queue tells its MemberMetrics.
type memberMetrics struct {
	depth     map[string]int
	waits     map[string]int
	forgotten []string
}

func (m *memberMetrics) Depth(member string, depth int)        { m.depth[member] = depth }
func (m *memberMetrics) Waited(member string, _ time.Duration) { m.waits[member]++ }
func (m *memberMetrics) Forget(member string) {
	m.forgotten = append(m.forgotten, member)
	delete(m.depth, member)
}

func TestIdleMemberIsForgotten(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Now())
	mm := &memberMetrics{depth: map[string]int{}, waits: map[string]int{}}
	q := New(Options[string]{MemberOf: memberOf, MemberMetrics: mm, Clock: fc})
	defer q.ShutDown()

	q.Add("a/1")
	q.Add("a/2")
	q.Add("b/1")
	if mm.depth["a"] != 2 || mm.depth["b"] != 1 {
		t.Fatalf("depths %v, want a 2, b 1", mm.depth)
	}
	for range 3 {
		item, _ := tryGet(q)
		// a/2 stays known through a resync requeue while in flight.
		if item == "a/2" {
			q.AddAfter(item, time.Minute)
		}
		q.Done(item)
	}
	if !slices.Equal(mm.forgotten, []string{"a", "b"}[1:]) || len(q.members) != 1 {
		t.Fatalf("forgotten %q, %d members; want b forgotten, a kept (a delayed item)", mm.forgotten, len(q.members))
	}
	if mm.waits["a"] != 2 || mm.waits["b"] != 1 {
		t.Fatalf("waits %v, want a 2, b 1", mm.waits)
	}
	advance(fc, q, time.Minute)
	q.Done(waitGet(t, q))
	if !slices.Equal(mm.forgotten, []string{"b", "a"}) || len(q.members) != 0 {
		t.Fatalf("forgotten %q, %d members; want b then a forgotten", mm.forgotten, len(q.members))
	}
}

// TestWorkqueueMetricsAreControllerRuntimes proves that a named Queue counts in the workqueue
// metrics of controller-runtime's registry (the dashboards and alerts read workqueue_depth); it
// fails if controller-runtime changes how it declares them.
func TestWorkqueueMetricsAreControllerRuntimes(t *testing.T) {
	t.Parallel()
	name := "fairqueue-test-" + strconv.FormatInt(time.Now().UnixNano(), 36) // one per run of -count
	q := New(Options[string]{MemberOf: memberOf, Name: name})
	defer q.ShutDown()
	q.Add("a/1")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, "b/1")
	q.AddAfter("c/1", time.Hour)

	want := map[string]float64{
		`workqueue_depth{priority="0"}`:    1,
		`workqueue_depth{priority="-100"}`: 1,
		`workqueue_adds_total{}`:           2,
		`workqueue_retries_total{}`:        1,
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering controller-runtime's registry: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] != name || labels["controller"] != name {
				continue
			}
			key := f.GetName() + "{}"
			if p, ok := labels["priority"]; ok {
				key = f.GetName() + `{priority="` + p + `"}`
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all of the queue's: %v)", k, got[k], v, got)
		}
	}
}

// TestConcurrentWorkers runs workers against adders, as a controller does: no item is ever
// handed out to two workers at once, no member holds more than its cap, and every item added is
// handed out after its last add.
func TestConcurrentWorkers(t *testing.T) {
	t.Parallel()
	const (
		workers, adders, addsEach, limit = 8, 4, 500, 2
	)
	q := New(Options[string]{MemberOf: memberOf, MaxInFlightPerMember: limit})
	var mu sync.Mutex
	inFlight := map[string]bool{}
	perMember := map[string]int{}
	pending := map[string]bool{} // added and not handed out since
	var errs []string
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[item] {
					errs = append(errs, item+" handed out twice at once")
				}
				inFlight[item] = true
				perMember[memberOf(item)]++
				if perMember[memberOf(item)] > limit {
					errs = append(errs, memberOf(item)+" over its cap")
				}
				delete(pending, item)
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				inFlight[item] = false
				perMember[memberOf(item)]--
				mu.Unlock()
				q.Done(item)
			}
		})
	}
	var adding sync.WaitGroup
	for a := range adders {
		adding.Go(func() {
			for i := range addsEach {
				item := fmt.Sprintf("m%d/%d", (a+i)%5, i%50)
				mu.Lock()
				pending[item] = true
				mu.Unlock()
				q.Add(item)
			}
		})
	}
	adding.Wait()
	for deadline := time.Now().Add(asyncTimeout); ; runtime.Gosched() {
		mu.Lock()
		left := len(pending)
		mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items added never handed out after their last add", left)
		}
	}
	q.ShutDownWithDrain()
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d faults, the first: %s", len(errs), errs[0])
	}
}
