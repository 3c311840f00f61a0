package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lock is client-go's Lease lock (resourcelock.LeaseLock) with each request bounded by
// Timings.RequestTimeout and a fence, Valid, judged on the local monotonic clock. It is a
// resourcelock.Interface, for client-go's and controller-runtime's leader election.
type Lock struct {
	inner   *resourcelock.LeaseLock
	timings Timings
	// onTimeout is called when a request times out: the hub connection it went over is likely
	// dead (a cut, a hung API server), and the next request must not wait on it.
	onTimeout func()

	mu sync.Mutex // guards validUntil; never held across a request
	// validUntil is when this process stops being sure it holds the Lease, by the monotonic
	// clock; the zero time when it does not hold it.
	validUntil time.Time
}

var _ resourcelock.Interface = &Lock{}

// NewLock returns the lock of the Lease namespace/name on the hub cluster of cfg, held as
// identity. onTimeout, if set, is called whenever one of its requests times out.
func NewLock(cfg *rest.Config, namespace, name, identity string, timings Timings, onTimeout func()) (*Lock, error) {
	leases, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the client of the Lease %s/%s: %w", namespace, name, err)
	}
	return &Lock{
		inner: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		timings:   timings,
		onTimeout: onTimeout,
	}, nil
}

// SetEventRecorder sets the recorder of the Events that announce a new leader. Call it before
// the election starts.
func (l *Lock) SetEventRecorder(r resourcelock.EventRecorder) { l.inner.LockConfig.EventRecorder = r }

// Valid reports whether this process certainly holds the Lease: its last successful
// acquisition or renewal started less than the lease duration ago, less Timings.Margin, by the
// local monotonic clock. Every other candidate waits at least the lease duration after it saw
// that write before it takes the Lease over.
func (l *Lock) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.validUntil)
}

// WriteDeadline is when a write that this process sends as the holder must have been answered:
// the end of the lease that its last renewal began, before which no other candidate may take the
// Lease over. Zero when it does not hold the Lease.
func (l *Lock) WriteDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.validUntil.IsZero() {
		return time.Time{}
	}
	return l.validUntil.Add(l.timings.Margin)
}

// Get implements resourcelock.Interface.
func (l *Lock) Get(ctx context.Context) (rec *resourcelock.LeaderElectionRecord, raw []byte, err error) {
	err = l.bounded(ctx, func(ctx context.Context) error {
		rec, raw, err = l.inner.Get(ctx)
		return err
	})
	return rec, raw, err
}

// Create implements resourcelock.Interface.
func (l *Lock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.inner.Create)
}

// Update implements resourcelock.Interface.
func (l *Lock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, rec, l.inner.Update)
}

// write writes rec: a record of another holder (a release) ends the fence before it leaves; a
// record of this one, once written, extends it from the time the request started.
func (l *Lock) write(ctx context.Context, rec resourcelock.LeaderElectionRecord, do func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	mine := rec.HolderIdentity == l.Identity()
	if !mine {
		l.setValidUntil(time.Time{})
	}
	start := time.Now()
	if err := l.bounded(ctx, func(ctx context.Context) error { return do(ctx, rec) }); err != nil {
		return err
	}
	if mine {
		l.setValidUntil(start.Add(time.Duration(rec.LeaseDurationSeconds)*time.Second - l.timings.Margin))
	}
	return nil
}

// setValidUntil sets validUntil.
func (l *Lock) setValidUntil(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.validUntil = t
}

// bounded runs one request within Timings.RequestTimeout, and calls onTimeout if it timed out.
func (l *Lock) bounded(ctx context.Context, request func(context.Context) error) error {
	reqCtx, cancel := context.WithTimeout(ctx, l.timings.RequestTimeout)
	defer cancel()
	err := request(reqCtx)
	if err != nil && ctx.Err() == nil && errors.Is(reqCtx.Err(), context.DeadlineExceeded) && l.onTimeout != nil {
		l.onTimeout()
	}
	return err
}

// RecordEvent implements resourcelock.Interface.
func (l *Lock) RecordEvent(s string) { l.inner.RecordEvent(s) }

// Identity implements resourcelock.Interface.
func (l *Lock) Identity() string { return l.inner.Identity() }

// Describe implements resourcelock.Interface.
func (l *Lock) Describe() string { return l.inner.Describe() }
