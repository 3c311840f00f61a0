package fairqueue

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The workqueue metrics controller-runtime registers (sigs.k8s.io/controller-runtime's
// pkg/internal/metrics, v0.24): the same options, so that registering them again finds
// controller-runtime's collectors (prometheus.AlreadyRegisteredError) and a Queue shows in the
// series a controller's own queue would. TestWorkqueueMetricsAreControllerRuntimes fails if
// controller-runtime changes them.
var (
	wqDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: ctrlmetrics.WorkQueueSubsystem,
		Name:      ctrlmetrics.DepthKey,
		Help:      "Current depth of workqueue by workqueue and priority",
	}, []string{"name", "controller", "priority"})

	wqAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: ctrlmetrics.WorkQueueSubsystem,
		Name:      ctrlmetrics.AddsKey,
		Help:      "Total number of adds handled by workqueue",
	}, []string{"name", "controller"})

	wqLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem:                       ctrlmetrics.WorkQueueSubsystem,
		Name:                            ctrlmetrics.QueueLatencyKey,
		Help:                            "How long in seconds an item stays in workqueue before being requested",
		Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: 1 * time.Hour,
	}, []string{"name", "controller"})

	wqWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem:                       ctrlmetrics.WorkQueueSubsystem,
		Name:                            ctrlmetrics.WorkDurationKey,
		Help:                            "How long in seconds processing an item from workqueue takes.",
		Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: 1 * time.Hour,
	}, []string{"name", "controller"})

	wqUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: ctrlmetrics.WorkQueueSubsystem,
		Name:      ctrlmetrics.UnfinishedWorkKey,
		Help: "How many seconds of work has been done that " +
			"is in progress and hasn't been observed by work_duration. Large " +
			"values indicate stuck threads. One can deduce the number of stuck " +
			"threads by observing the rate at which this increases.",
	}, []string{"name", "controller"})

	wqLongestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: ctrlmetrics.WorkQueueSubsystem,
		Name:      ctrlmetrics.LongestRunningProcessorKey,
		Help: "How many seconds has the longest running " +
			"processor for workqueue been running.",
	}, []string{"name", "controller"})

	wqRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: ctrlmetrics.WorkQueueSubsystem,
		Name:      ctrlmetrics.RetriesKey,
		Help:      "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
	}, []string{"name", "controller"})
)

func init() {
	wqDepth = registered(wqDepth)
	wqAdds = registered(wqAdds)
	wqLatency = registered(wqLatency)
	wqWorkDuration = registered(wqWorkDuration)
	wqUnfinished = registered(wqUnfinished)
	wqLongestRunning = registered(wqLongestRunning)
	wqRetries = registered(wqRetries)
}

// registered is the collector of controller-runtime's registry that c is a copy of, or c,
// registered, if the registry has none; a collector that conflicts with the registry's stays
// unregistered (and the test above fails).
func registered[C prometheus.Collector](c C) C {
	var exists prometheus.AlreadyRegisteredError
	if err := ctrlmetrics.Registry.Register(c); errors.As(err, &exists) {
		if existing, ok := exists.ExistingCollector.(C); ok {
			return existing
		}
	}
	return c
}

// workqueueMetrics are the workqueue metrics of one Queue; nil records nothing. Their methods
// are called with the queue's lock held.
type workqueueMetrics[T comparable] struct {
	name            string
	adds, retries   prometheus.Counter
	latency, work   prometheus.Observer
	unfinished      prometheus.Gauge
	longestRunning  prometheus.Gauge
	processingSince map[T]time.Time
}

func newWorkqueueMetrics[T comparable](name string) *workqueueMetrics[T] {
	return &workqueueMetrics[T]{
		name:            name,
		adds:            wqAdds.WithLabelValues(name, name),
		retries:         wqRetries.WithLabelValues(name, name),
		latency:         wqLatency.WithLabelValues(name, name),
		work:            wqWorkDuration.WithLabelValues(name, name),
		unfinished:      wqUnfinished.WithLabelValues(name, name),
		longestRunning:  wqLongestRunning.WithLabelValues(name, name),
		processingSince: map[T]time.Time{},
	}
}

func (m *workqueueMetrics[T]) depth(priority int) prometheus.Gauge {
	return wqDepth.WithLabelValues(m.name, m.name, strconv.Itoa(priority))
}

// add counts an item made ready.
func (m *workqueueMetrics[T]) add(priority int) {
	if m == nil {
		return
	}
	m.adds.Inc()
	m.depth(priority).Inc()
}

func (m *workqueueMetrics[T]) reprioritise(from, to int) {
	if m == nil {
		return
	}
	m.depth(from).Dec()
	m.depth(to).Inc()
}

// get counts an item handed out after waiting wait.
func (m *workqueueMetrics[T]) get(item T, priority int, wait time.Duration, now time.Time) {
	if m == nil {
		return
	}
	m.depth(priority).Dec()
	m.latency.Observe(wait.Seconds())
	m.processingSince[item] = now
}

func (m *workqueueMetrics[T]) done(item T, now time.Time) {
	if m == nil {
		return
	}
	if since, ok := m.processingSince[item]; ok {
		m.work.Observe(now.Sub(since).Seconds())
		delete(m.processingSince, item)
	}
}

func (m *workqueueMetrics[T]) retry() {
	if m == nil {
		return
	}
	m.retries.Inc()
}

// updateUnfinished sets the seconds of work in progress and of the longest running item.
func (m *workqueueMetrics[T]) updateUnfinished(now time.Time) {
	var total, longest float64
	for _, since := range m.processingSince {
		age := now.Sub(since).Seconds()
		total += age
		longest = max(longest, age)
	}
	m.unfinished.Set(total)
	m.longestRunning.Set(longest)
}

// updateUnfinishedWork updates the work in progress every half second (as client-go's
// workqueue does) until the queue is shut down.
func (q *Queue[T]) updateUnfinishedWork() {
	t := q.opts.Clock.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-q.done:
			return
		case <-t.C():
		}
		q.lock.Lock()
		q.metrics.updateUnfinished(q.opts.Clock.Now())
		q.lock.Unlock()
	}
}
