package sharding

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding/election"
)

// duplicateReplica is 1 while this process acts on nothing because another live process holds
// the Lease of its replica id: alert on max(configbundle_hub_duplicate_replica) > 0.
var duplicateReplica = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "configbundle_hub_duplicate_replica",
	Help: "1 while this hub process writes nothing because another live process holds the Lease of its --replica-id (its peer Lease with --sharded, the leader-election Lease with --leader-elect); it exits 1 a lease duration later. Else 0.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(duplicateReplica)
}

// duplicateReport reports that this process found its replica id taken by another live process:
// a log line, the gauge, and an Event on the Fleet once a recorder is set.
type duplicateReport struct {
	log logr.Logger
	// id is the replica id, lease its peer Lease (the Event's related object).
	id    string
	lease *coordinationv1.Lease

	mu       sync.Mutex
	recorder events.EventRecorder
}

// setRecorder sets the recorder of the Event.
func (d *duplicateReport) setRecorder(recorder events.EventRecorder) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recorder = recorder
}

// report reports err, which says which process holds the Lease.
func (d *duplicateReport) report(err error) {
	duplicateReplica.Set(1)
	d.log.Error(err, "Another live process holds this replica's id: writing nothing, and exiting after a lease duration",
		"lease", d.lease.Namespace+"/"+d.lease.Name)
	d.mu.Lock()
	recorder := d.recorder
	d.mu.Unlock()
	if recorder == nil {
		return
	}
	fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}}
	recorder.Eventf(fleet, d.lease, corev1.EventTypeWarning, hubv1alpha1.DuplicateReplicaEvent, "Refuse",
		"Replica %s: %v; this process writes nothing and exits", d.id, err)
}

// DuplicateGuard returns, for a replica fenced by the leader-election Lease (FencedBy), the
// runnable that ends its manager a lease duration after the lock found another live process
// holding the Lease under the replica id. That process runs on; this one has written nothing to
// any member (it never led), and reports it as a sharded replica does: a log line, the gauge
// configbundle_hub_duplicate_replica, and the Event DuplicateReplica on the Fleet, recorded with
// recorder. Nil for a replica not fenced by a lock.
func (r Replica) DuplicateGuard(recorder events.EventRecorder, leaseDuration time.Duration) manager.Runnable {
	if r.lease == nil {
		return nil
	}
	namespace, name := r.lease.Lease()
	report := &duplicateReport{log: ctrl.Log.WithName("election").WithValues("replica", r.ID), id: r.ID, recorder: recorder,
		lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
	return duplicateGuard{lock: r.lease, report: report, wait: leaseDuration}
}

// duplicateGuard is Replica.DuplicateGuard's runnable.
type duplicateGuard struct {
	lock   *election.Lock
	report *duplicateReport
	wait   time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: it runs on every replica.
func (duplicateGuard) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (g duplicateGuard) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-g.lock.Duplicate():
	}
	err := g.lock.Err()
	g.report.report(err)
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(g.wait):
	}
	return err
}
