package fairqueue

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// Options configure a Queue.
type Options[T comparable] struct {
	// MemberOf names the member an item belongs to: the queue is fair across the names it
	// returns. Required.
	MemberOf func(T) string

	// MaxInFlightPerMember caps the items of one member handed out by Get and not yet Done.
	// Defaults to 0: no cap.
	MaxInFlightPerMember int

	// RateLimiter gives the delay of AddRateLimited and keeps NumRequeues. Defaults to a per-item
	// exponential backoff from 5 ms to 1000 s, controller-runtime's default for its priority
	// queue.
	RateLimiter workqueue.TypedRateLimiter[T]

	// Name, if set, names the queue in controller-runtime's workqueue metrics (workqueue_depth
	// and the others, labels name and controller), as a controller of that name would name its
	// own queue. Defaults to "": no workqueue metrics.
	Name string

	// MemberMetrics, if set, is told each member's depth and queue waits. Defaults to nil.
	MemberMetrics MemberMetrics

	// Clock tells the time of delayed items and of the metrics. Defaults to the real clock.
	Clock clock.WithTicker
}

// MemberMetrics receive the figures of each member's sub-queue. They are called with the
// queue's lock held, so they must be quick and must not call the queue.
type MemberMetrics interface {
	// Depth is the number of the member's items ready to be handed out, whenever it changes.
	Depth(member string, depth int)
	// Waited is the time an item of the member waited, from ready to handed out to a worker.
	Waited(member string, wait time.Duration)
	// Forget is called when the member's sub-queue is dropped, empty and idle.
	Forget(member string)
}

// defaults applies the defaults of Options: the one place they are applied.
func (o *Options[T]) defaults() {
	if o.RateLimiter == nil {
		o.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.MaxInFlightPerMember = max(o.MaxInFlightPerMember, 0)
}

// Queue is a work queue fair across members; the package documentation says how. New makes
// one; it must be shut down to release its goroutines.
type Queue[T comparable] struct {
	opts    Options[T]
	metrics *workqueueMetrics[T]

	// lock guards every field below; cond, on lock, wakes the Gets waiting for an item and a
	// ShutDownWithDrain waiting for the items in flight.
	lock sync.Mutex
	cond *sync.Cond
	// members holds the sub-queue of every member that has an item queued, delayed, in flight
	// or to be queued again after Done.
	members map[string]*member[T]
	// queued holds the items ready (in their member's ready heap) or delayed (in waiting).
	queued map[T]*entry[T]
	// inFlight holds the items handed out and not yet Done; again, those of them added again
	// meanwhile, with what they were added with, queued on Done.
	inFlight map[T]*member[T]
	again    map[T]*entry[T]
	waiting  waitHeap[T]
	ready    int    // items ready in all members, for Len
	counter  uint64 // orders items (first in, first out) and members (served longest ago)
	shutdown bool

	// waitingChanged wakes the goroutine that moves delayed items when they are due; done ends
	// it and the metrics goroutine.
	waitingChanged chan struct{}
	done           chan struct{}
}

var _ priorityqueue.PriorityQueue[string] = &Queue[string]{}

// member is one member's sub-queue.
type member[T comparable] struct {
	name       string
	ready      readyHeap[T]
	delayed    int // items in waiting
	inFlight   int // items handed out, not yet Done
	again      int // items in again
	lastServed uint64
}

// entry is an item queued, or to be queued again after Done.
type entry[T comparable] struct {
	item     T
	member   *member[T]
	priority int
	seq      uint64
	readyAt  time.Time // zero: ready
	since    time.Time // when it became ready, for the wait metrics
	index    int       // in its heap
}

// New returns a Queue, running. ShutDown stops it.
func New[T comparable](opts Options[T]) *Queue[T] {
	opts.defaults()
	q := &Queue[T]{
		opts:           opts,
		members:        map[string]*member[T]{},
		queued:         map[T]*entry[T]{},
		inFlight:       map[T]*member[T]{},
		again:          map[T]*entry[T]{},
		waitingChanged: make(chan struct{}, 1),
		done:           make(chan struct{}),
	}
	q.cond = sync.NewCond(&q.lock)
	go q.moveDueItems()
	if opts.Name != "" {
		q.metrics = newWorkqueueMetrics[T](opts.Name)
		go q.updateUnfinishedWork()
	}
	return q
}

// Add adds item at the default priority, 0.
func (q *Queue[T]) Add(item T) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

// AddAfter adds item once after has passed.
func (q *Queue[T]) AddAfter(item T, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

// AddRateLimited adds item once the rate limiter allows it.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

// AddWithOpts adds items with the options o. An item already queued keeps the highest of its
// priorities and the earliest of its ready times; an item in flight is queued again on Done.
func (q *Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	q.lock.Lock()
	defer q.lock.Unlock()
	if q.shutdown {
		return
	}
	now := q.opts.Clock.Now()
	for _, item := range items {
		after := o.After
		if o.RateLimited {
			if limited := q.opts.RateLimiter.When(item); after <= 0 || limited < after {
				after = limited
			}
		}
		var readyAt time.Time
		if after > 0 {
			readyAt = now.Add(after)
			q.metrics.retry()
		}
		q.addLocked(item, ptr.Deref(o.Priority, 0), readyAt, now)
	}
}

func (q *Queue[T]) addLocked(item T, priority int, readyAt, now time.Time) {
	if e, ok := q.again[item]; ok {
		e.merge(priority, readyAt, q.nextLocked)
		return
	}
	if m, ok := q.inFlight[item]; ok {
		q.again[item] = &entry[T]{item: item, member: m, priority: priority, seq: q.nextLocked(), readyAt: readyAt, index: -1}
		m.again++
		return
	}
	e, ok := q.queued[item]
	if !ok {
		e = &entry[T]{item: item, member: q.memberLocked(q.opts.MemberOf(item)), priority: priority, seq: q.nextLocked(), index: -1}
		q.queued[item] = e
		q.queueLocked(e, readyAt, now)
		return
	}
	wasDelayed, oldReadyAt, oldPriority := !e.readyAt.IsZero(), e.readyAt, e.priority
	e.merge(priority, readyAt, q.nextLocked)
	switch {
	case wasDelayed && e.readyAt.IsZero():
		heap.Remove(&q.waiting, e.index)
		e.member.delayed--
		q.readyLocked(e, now)
	case wasDelayed && e.readyAt.Before(oldReadyAt):
		heap.Fix(&q.waiting, e.index)
		q.notifyWaitingChanged()
	case !wasDelayed && e.priority != oldPriority:
		q.metrics.reprioritise(oldPriority, e.priority)
		heap.Fix(&e.member.ready, e.index)
	}
}

// merge takes the highest priority (a raised one goes behind the items already at that
// priority, first in first out) and the earliest ready time (zero: now).
func (e *entry[T]) merge(priority int, readyAt time.Time, next func() uint64) {
	if priority > e.priority {
		e.priority, e.seq = priority, next()
	}
	if readyAt.IsZero() || (!e.readyAt.IsZero() && readyAt.Before(e.readyAt)) {
		e.readyAt = readyAt
	}
}

// queueLocked puts a queued entry where it belongs: ready now, or delayed until readyAt.
func (q *Queue[T]) queueLocked(e *entry[T], readyAt, now time.Time) {
	if readyAt.IsZero() || !readyAt.After(now) {
		q.readyLocked(e, now)
		return
	}
	e.readyAt = readyAt
	e.member.delayed++
	heap.Push(&q.waiting, e)
	q.notifyWaitingChanged()
}

// readyLocked makes e ready to be handed out.
func (q *Queue[T]) readyLocked(e *entry[T], now time.Time) {
	e.readyAt, e.since = time.Time{}, now
	heap.Push(&e.member.ready, e)
	q.ready++
	q.metrics.add(e.priority)
	q.depthLocked(e.member)
	// One item, one worker: waking every idle worker for each item (8 by default) cost a
	// context switch each on the heal path, for all but one to find nothing and wait again. A
	// worker that is not waiting looks again before it waits; Done wakes them all.
	q.cond.Signal()
}

// Get hands out the next item, fairly across members; it blocks until there is one or the
// queue is shut down.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority is Get that also says the item's priority.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	q.lock.Lock()
	defer q.lock.Unlock()
	for {
		if q.shutdown {
			var zero T
			return zero, 0, true
		}
		if m := q.nextMemberLocked(); m != nil {
			e := q.handOutLocked(m)
			return e.item, e.priority, false
		}
		q.cond.Wait()
	}
}

// nextMemberLocked is the member to serve next, or nil if none may be: of the members with an
// item ready and fewer than MaxInFlightPerMember in flight, the one whose head has the highest
// priority, then the fewest items in flight, then the one served longest ago.
func (q *Queue[T]) nextMemberLocked() *member[T] {
	var best *member[T]
	for _, m := range q.members {
		if m.ready.Len() == 0 || (q.opts.MaxInFlightPerMember > 0 && m.inFlight >= q.opts.MaxInFlightPerMember) {
			continue
		}
		if best == nil || servedBefore(m, best) {
			best = m
		}
	}
	return best
}

// servedBefore says whether member a is to be served before member b.
func servedBefore[T comparable](a, b *member[T]) bool {
	if pa, pb := a.ready[0].priority, b.ready[0].priority; pa != pb {
		return pa > pb
	}
	if a.inFlight != b.inFlight {
		return a.inFlight < b.inFlight
	}
	return a.lastServed < b.lastServed
}

func (q *Queue[T]) handOutLocked(m *member[T]) *entry[T] {
	e := heap.Pop(&m.ready).(*entry[T])
	q.ready--
	delete(q.queued, e.item)
	q.inFlight[e.item] = m
	m.inFlight++
	m.lastServed = q.nextLocked()
	now := q.opts.Clock.Now()
	q.metrics.get(e.item, e.priority, now.Sub(e.since), now)
	q.depthLocked(m)
	if q.opts.MemberMetrics != nil {
		q.opts.MemberMetrics.Waited(m.name, now.Sub(e.since))
	}
	return e
}

// Done marks item as done: it may be handed out again, at once if it was added meanwhile.
func (q *Queue[T]) Done(item T) {
	q.lock.Lock()
	defer q.lock.Unlock()
	m, ok := q.inFlight[item]
	if !ok {
		return
	}
	delete(q.inFlight, item)
	m.inFlight--
	now := q.opts.Clock.Now()
	q.metrics.done(item, now)
	if e, ok := q.again[item]; ok {
		delete(q.again, item)
		m.again--
		if !q.shutdown {
			q.queued[item] = e
			readyAt := e.readyAt
			e.readyAt = time.Time{}
			q.queueLocked(e, readyAt, now)
		}
	}
	q.forgetIfIdleLocked(m)
	q.cond.Broadcast() // the member may be served again; a drain may be over
}

// Forget forgets the failures of item in the rate limiter.
func (q *Queue[T]) Forget(item T) { q.opts.RateLimiter.Forget(item) }

// NumRequeues is the number of failures of item the rate limiter counts.
func (q *Queue[T]) NumRequeues(item T) int { return q.opts.RateLimiter.NumRequeues(item) }

// Len is the number of items ready to be handed out, in all members; delayed items and items
// in flight are not counted.
func (q *Queue[T]) Len() int {
	q.lock.Lock()
	defer q.lock.Unlock()
	return q.ready
}

// ShutDown stops the queue: every Get returns at once, saying so, and adds are ignored.
func (q *Queue[T]) ShutDown() {
	q.lock.Lock()
	defer q.lock.Unlock()
	q.shutDownLocked()
}

// ShutDownWithDrain is ShutDown, then it waits until every item in flight is Done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.lock.Lock()
	defer q.lock.Unlock()
	q.shutDownLocked()
	for len(q.inFlight) > 0 {
		q.cond.Wait()
	}
}

func (q *Queue[T]) shutDownLocked() {
	if q.shutdown {
		return
	}
	q.shutdown = true
	close(q.done)
	q.cond.Broadcast()
}

// ShuttingDown says whether the queue is shut down.
func (q *Queue[T]) ShuttingDown() bool {
	q.lock.Lock()
	defer q.lock.Unlock()
	return q.shutdown
}

// memberLocked is the sub-queue of the member name, made if there is none.
func (q *Queue[T]) memberLocked(name string) *member[T] {
	m, ok := q.members[name]
	if !ok {
		m = &member[T]{name: name, lastServed: q.nextLocked()} // last in the round
		q.members[name] = m
	}
	return m
}

// forgetIfIdleLocked drops m if it holds nothing: no item ready, delayed, in flight or to be
// queued again.
func (q *Queue[T]) forgetIfIdleLocked(m *member[T]) {
	if m.ready.Len() > 0 || m.delayed > 0 || m.inFlight > 0 || m.again > 0 {
		return
	}
	delete(q.members, m.name)
	if q.opts.MemberMetrics != nil {
		q.opts.MemberMetrics.Forget(m.name)
	}
}

func (q *Queue[T]) depthLocked(m *member[T]) {
	if q.opts.MemberMetrics != nil {
		q.opts.MemberMetrics.Depth(m.name, m.ready.Len())
	}
}

func (q *Queue[T]) nextLocked() uint64 {
	q.counter++
	return q.counter
}

func (q *Queue[T]) notifyWaitingChanged() {
	select {
	case q.waitingChanged <- struct{}{}:
	default:
	}
}

// moveDueItems makes the delayed items ready when they are due, until the queue is shut down.
func (q *Queue[T]) moveDueItems() {
	for {
		q.lock.Lock()
		now := q.opts.Clock.Now()
		for q.waiting.Len() > 0 && !q.waiting[0].readyAt.After(now) {
			e := heap.Pop(&q.waiting).(*entry[T])
			e.member.delayed--
			e.seq = q.nextLocked() // first in, first out by the time it became ready
			q.readyLocked(e, now)
		}
		var due <-chan time.Time
		var timer clock.Timer
		if q.waiting.Len() > 0 {
			timer = q.opts.Clock.NewTimer(q.waiting[0].readyAt.Sub(now))
			due = timer.C()
		}
		q.lock.Unlock()

		select {
		case <-q.done:
		case <-q.waitingChanged:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-q.done:
			return
		default:
		}
	}
}

// readyHeap orders a member's ready items: highest priority first, then first in first out.
type readyHeap[T comparable] = entryHeap[T, byPriority[T]]

// waitHeap orders the delayed items of all members: the earliest due first.
type waitHeap[T comparable] = entryHeap[T, byDue[T]]

// byPriority orders entries by priority, highest first, then first in first out.
type byPriority[T comparable] struct{}

func (byPriority[T]) less(a, b *entry[T]) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}

// byDue orders entries by when they are due, earliest first, then first in first out.
type byDue[T comparable] struct{}

func (byDue[T]) less(a, b *entry[T]) bool {
	if !a.readyAt.Equal(b.readyAt) {
		return a.readyAt.Before(b.readyAt)
	}
	return a.seq < b.seq
}

// entryHeap is a container/heap of entries in the order O, keeping each entry's index.
type entryHeap[T comparable, O interface{ less(a, b *entry[T]) bool }] []*entry[T]

func (h entryHeap[T, O]) Len() int           { return len(h) }
func (h entryHeap[T, O]) Less(i, j int) bool { var o O; return o.less(h[i], h[j]) }
func (h entryHeap[T, O]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap[T, O]) Push(x any) {
	e := x.(*entry[T])
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap[T, O]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
