package election

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// IncarnationAnnotation names, on the leader-election Lease, the process that last wrote it as
// its holder: a random id that each process draws at start (host, pid and a random suffix), as
// the sharded replicas' peer Leases carry it. The Lease's holder is the replica id, the same for
// every run of a replica; the incarnation tells two processes with that id apart.
const IncarnationAnnotation = "mcr.sigs.k8s.io/incarnation"

// ErrDuplicate is what Lock.Duplicate says, wrapped, when another live process holds the Lease
// under this process's identity: it renewed the Lease while this process watched it.
var ErrDuplicate = errors.New("another live process holds the leader-election Lease under this replica id")

// Lock is a Lease lock for client-go's and controller-runtime's leader election (a
// resourcelock.Interface, as resourcelock.LeaseLock), with each request bounded by
// Timings.RequestTimeout and a fence, Valid, judged on the local monotonic clock.
//
// It tells processes apart, not only identities: a Lease held under this identity by another
// incarnation (IncarnationAnnotation) is shown to the election as held by another, so that this
// process waits, as for any other holder, until that one releases it or leaves it unrenewed for
// a lease duration (a previous run of this replica, killed). If that process renews it instead,
// it is a live duplicate: this process writes the Lease never again, and Duplicate says so.
type Lock struct {
	leases      coordinationv1client.LeasesGetter
	namespace   string
	name        string
	identity    string
	incarnation string
	recorder    resourcelock.EventRecorder
	timings     Timings
	// onTimeout is called when a request times out: the hub connection it went over is likely
	// dead (a cut, a hung API server), and the next request must not wait on it.
	onTimeout func()

	// duplicate is closed once another live process is known to hold the Lease under this
	// identity; duplicateErr says which.
	duplicate chan struct{}

	mu sync.Mutex // guards the fields below; never held across a request
	// lease is the Lease as last read or written.
	lease *coordinationv1.Lease
	// otherVersion is the resourceVersion of the Lease when it was first seen held under this
	// identity by another incarnation; empty when it is not.
	otherVersion string
	duplicateErr error
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
	host, _ := os.Hostname()
	return &Lock{
		leases:      leases,
		namespace:   namespace,
		name:        name,
		identity:    identity,
		incarnation: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:10]),
		timings:     timings,
		onTimeout:   onTimeout,
		duplicate:   make(chan struct{}),
	}, nil
}

// SetEventRecorder sets the recorder of the Events that announce a new leader. Call it before
// the election starts.
func (l *Lock) SetEventRecorder(r resourcelock.EventRecorder) { l.recorder = r }

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

// Duplicate is closed once another live process holds the Lease under this process's identity;
// then Err says which, and this process never writes the Lease again.
func (l *Lock) Duplicate() <-chan struct{} { return l.duplicate }

// Err returns an error wrapping ErrDuplicate once Duplicate is closed; nil before.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.duplicateErr
}

// Get implements resourcelock.Interface. A Lease held under this identity by another
// incarnation is returned as held by another holder (the identity and that incarnation).
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	var lease *coordinationv1.Lease
	err := l.bounded(ctx, func(ctx context.Context) (err error) {
		lease, err = l.leases.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	if rec.HolderIdentity == l.identity && lease.Annotations[IncarnationAnnotation] != l.incarnation {
		rec.HolderIdentity = fmt.Sprintf("%s (another process: %q)", l.identity, lease.Annotations[IncarnationAnnotation])
		l.heldByAnother(lease)
	} else {
		l.mu.Lock()
		l.otherVersion = ""
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	raw, err := json.Marshal(*rec)
	return rec, raw, err
}

// heldByAnother notes that lease is held under this identity by another incarnation: the second
// time it is seen so with another resourceVersion, that process renewed it, and is a duplicate.
func (l *Lock) heldByAnother(lease *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.validUntil = time.Time{}
	switch {
	case l.duplicateErr != nil:
	case l.otherVersion == "":
		l.otherVersion = lease.ResourceVersion
	case l.otherVersion != lease.ResourceVersion:
		l.duplicateErr = fmt.Errorf("%w: the Lease %s/%s is held and renewed by %q, not by this process %q",
			ErrDuplicate, l.namespace, l.name, lease.Annotations[IncarnationAnnotation], l.incarnation)
		close(l.duplicate)
	}
}

// Create implements resourcelock.Interface.
func (l *Lock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: l.name}}
	return l.write(ctx, rec, lease, func(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		return l.leases.Leases(l.namespace).Create(ctx, lease, metav1.CreateOptions{})
	})
}

// Update implements resourcelock.Interface: it writes the Lease as last read or written, on the
// condition of its resourceVersion.
func (l *Lock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	last := l.lease
	l.mu.Unlock()
	if last == nil {
		return errors.New("the Lease is not read yet: call Get or Create first")
	}
	return l.write(ctx, rec, last.DeepCopy(), func(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		return l.leases.Leases(l.namespace).Update(ctx, lease, metav1.UpdateOptions{})
	})
}

// write writes rec into lease, with this incarnation if rec is held by this identity: a record
// of another holder (a release) ends the fence before it leaves; a record of this one, once
// written, extends it from the time the request started. A duplicate writes nothing.
func (l *Lock) write(ctx context.Context, rec resourcelock.LeaderElectionRecord, lease *coordinationv1.Lease,
	do func(context.Context, *coordinationv1.Lease) (*coordinationv1.Lease, error)) error {
	if err := l.Err(); err != nil {
		return err
	}
	mine := rec.HolderIdentity == l.Identity()
	if !mine {
		l.setValidUntil(time.Time{})
	}
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	if mine {
		metav1.SetMetaDataAnnotation(&lease.ObjectMeta, IncarnationAnnotation, l.incarnation)
	}
	start := time.Now()
	var written *coordinationv1.Lease
	if err := l.bounded(ctx, func(ctx context.Context) (err error) {
		written, err = do(ctx, lease)
		return err
	}); err != nil {
		return err
	}
	l.mu.Lock()
	l.lease = written
	l.mu.Unlock()
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

// RecordEvent implements resourcelock.Interface: a Normal Event LeaderElection on the Lease.
func (l *Lock) RecordEvent(s string) {
	l.mu.Lock()
	recorder, lease := l.recorder, l.lease
	l.mu.Unlock()
	if recorder == nil || lease == nil {
		return
	}
	subject := &coordinationv1.Lease{ObjectMeta: lease.ObjectMeta}
	subject.Kind, subject.APIVersion = "Lease", coordinationv1.SchemeGroupVersion.String()
	recorder.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%s %s", l.identity, s)
}

// Identity implements resourcelock.Interface.
func (l *Lock) Identity() string { return l.identity }

// Lease returns the namespace and name of the Lease.
func (l *Lock) Lease() (namespace, name string) { return l.namespace, l.name }

// Describe implements resourcelock.Interface.
func (l *Lock) Describe() string { return l.namespace + "/" + l.name }
