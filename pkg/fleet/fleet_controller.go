package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/sharding"
	"configbundle.dev/hub/pkg/statusbudget"
)

// The Fleet roll-up reads the FleetBundles of all namespaces (placement, pkg/placement, also
// writes them).
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=fleetbundles,verbs=get;list;watch

// fleetReconciler keeps the Fleet "default" equal to the sum of the MemberClusters and the
// FleetBundles, and its heartbeat fresh.
type fleetReconciler struct {
	hub       client.Client
	heartbeat time.Duration
	replica   sharding.Replica
	sync      func(multicluster.ClusterName) configbundle.Sync
}

// setupFleet builds the Fleet controller. Unless sharded it waits for the manager's leader
// election, if any; sharded, it runs on every replica and writes only on the one elected for
// the hub-wide work (Replica.Leading), which starts over with the Fleet each time it is elected.
func setupFleet(mgr manager.Manager, opts Options) error {
	r := &fleetReconciler{hub: mgr.GetClient(), heartbeat: opts.HeartbeatInterval, replica: opts.Replica, sync: opts.Sync}
	toDefault := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: hubv1alpha1.FleetName}}}
	})
	// Without any MemberCluster nothing would wake the controller: it starts with one request.
	once := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: hubv1alpha1.FleetName}})
		return nil
	})
	elected := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		opts.Replica.OnElected(func() { q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: hubv1alpha1.FleetName}}) })
		return nil
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("fleet").
		For(&hubv1alpha1.Fleet{}).
		Watches(&hubv1alpha1.MemberCluster{}, toDefault).
		Watches(&hubv1alpha1.FleetBundle{}, toDefault).
		WatchesRawSource(once).
		WatchesRawSource(elected).
		WithOptions(controller.Options{
			NeedLeaderElection: ptr.To(!opts.Replica.Sharded()),
			RateLimiter:        statusbudget.RateLimiter[reconcile.Request](),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("building the fleet controller: %w", err)
	}
	return nil
}

// Reconcile computes the Fleet's status from the MemberClusters and the FleetBundles and writes
// it if it changed or its heartbeat is due.
func (r *fleetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	if req.Name != hubv1alpha1.FleetName {
		return ctrl.Result{}, nil
	}
	if !r.replica.Leading() {
		// Another replica writes it; this one starts over when elected. The requeue of the
		// heartbeat brings a replica that stopped leading here once more.
		membersUnowned.Set(0)
		return ctrl.Result{}, nil
	}
	members := &hubv1alpha1.MemberClusterList{}
	if err := r.hub.List(ctx, members); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing MemberClusters: %w", err)
	}
	bundles := &hubv1alpha1.FleetBundleList{}
	if err := r.hub.List(ctx, bundles); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing FleetBundles: %w", err)
	}
	fleet := &hubv1alpha1.Fleet{}
	if err := r.hub.Get(ctx, req.NamespacedName, fleet); apierrors.IsNotFound(err) {
		fleet = &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}}
		if err := r.hub.Create(ctx, fleet, client.FieldOwner(hubv1alpha1.FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("creating Fleet: %w", err)
		}
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading Fleet: %w", err)
	}
	now := time.Now()
	r.ownSync(members.Items)
	want := FleetStatus(fleet.Status, members.Items, bundles.Items)
	want.Clusters.Unowned = r.unowned(fleet.Status.Clusters.Unowned, members.Items)
	want.HeartbeatIntervalSeconds = int64((r.heartbeat + time.Second - 1) / time.Second) // rounded up
	beat := fleet.Status.HeartbeatTime
	if due := beat == nil || now.Sub(beat.Time) >= r.heartbeat; due {
		want.HeartbeatTime = &metav1.Time{Time: now.Truncate(time.Second)}
	} else if equality.Semantic.DeepEqual(want, fleet.Status) {
		return ctrl.Result{RequeueAfter: r.heartbeat - now.Sub(beat.Time)}, nil
	}
	updated := fleet.DeepCopy()
	updated.Status = want
	if err := r.hub.Status().Update(ctx, updated, client.FieldOwner(hubv1alpha1.FieldOwner)); apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil // a newer Fleet is on its way: compute again
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing Fleet status: %w", err)
	}
	return ctrl.Result{RequeueAfter: r.heartbeat - now.Sub(updated.Status.HeartbeatTime.Time)}, nil
}

// ownSync sets, in the MemberClusters of the members this replica manages and has not synced
// yet (Options.Sync), the Synced condition this process would write now: a MemberCluster holds
// what the hub that wrote it last saw, an earlier process's after a restart, until this one
// writes it, and the Fleet must not vouch for a member this process has not synced yet. A member
// this process has synced keeps what its MemberCluster says, so that the Fleet is never ahead of
// it: the Fleet is Ready only once the MemberCluster says Synced.
func (r *fleetReconciler) ownSync(members []hubv1alpha1.MemberCluster) {
	if r.sync == nil {
		return
	}
	for i := range members {
		if !r.replica.Owns(members[i].Name) {
			continue
		}
		if s := r.sync(multicluster.ClusterName(members[i].Name)); !s.Synced() {
			meta.SetStatusCondition(&members[i].Status.Conditions, syncedCondition(s))
		}
	}
}

// unowned counts the members no live hub replica manages (CountUnowned) and exports the count.
// The live replicas are, sharded, those whose peer Lease is valid, and before the first look at
// the peer Leases unknown: then the last count stays; otherwise this replica alone. Every
// heartbeat requeues the Fleet, so a change of the live replicas shows within one.
func (r *fleetReconciler) unowned(last int32, members []hubv1alpha1.MemberCluster) int32 {
	n := last
	switch live := r.replica.LiveReplicas(); {
	case !r.replica.Sharded():
		n = CountUnowned(members, []string{r.replica.ID}, true)
	case len(live) > 0:
		n = CountUnowned(members, live, false)
	}
	membersUnowned.Set(float64(n))
	return n
}

// CountUnowned counts the members that no live replica manages: whose status.replica is none
// of live. A member whose status.replica is empty has not been reported by any replica yet: it
// counts only unless emptyOwned, as when one hub, not sharded, manages every member.
func CountUnowned(members []hubv1alpha1.MemberCluster, live []string, emptyOwned bool) int32 {
	var n int32
	for _, mc := range members {
		if owner := mc.Status.Replica; !slices.Contains(live, owner) && (owner != "" || !emptyOwned) {
			n++
		}
	}
	return n
}

// FleetStatus sums up MemberClusters and FleetBundles into a Fleet status, starting from
// current (which keeps the Ready condition's transition time, and the heartbeat). A paused
// member is counted in clusters.paused as well; pausing changes nothing else. A Ready member
// whose Synced condition is not True keeps the Fleet from Ready (MembersSyncing).
func FleetStatus(current hubv1alpha1.FleetStatus, members []hubv1alpha1.MemberCluster, bundles []hubv1alpha1.FleetBundle) hubv1alpha1.FleetStatus {
	st := *current.DeepCopy()
	notReady, unsynced, failing := sumMembers(&st, members)
	st.FleetBundles = CountFleetBundles(bundles)
	failedFleetBundles := failedFleetBundleNames(bundles)
	// also says, after the message of a reason that wins over FleetBundlesFailed, how many
	// FleetBundles have failed too.
	also := ""
	if n := st.FleetBundles.Failed; n > 0 {
		also = fmt.Sprintf("; %d of %d FleetBundles have failed too", n, st.FleetBundles.Total)
	}
	ready := metav1.Condition{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse}
	switch {
	case st.Clusters.Total == 0:
		ready.Reason, ready.Message = hubv1alpha1.NoMembersReason, "No member cluster is registered"+also
	case len(notReady) > 0:
		ready.Reason = hubv1alpha1.MembersNotReadyReason
		ready.Message = fmt.Sprintf("%d of %d members not Ready: %s%s", len(notReady), st.Clusters.Total, firstNames(notReady), also)
	case len(unsynced) > 0:
		ready.Reason = hubv1alpha1.MembersSyncingReason
		ready.Message = fmt.Sprintf("%d of %d members not synced: the hub has not yet reconciled every ConfigBundle they held when they connected (their Synced condition says how many are left): %s%s",
			len(unsynced), st.Clusters.Total, firstNames(unsynced), also)
	case st.Bundles.Failed > 0:
		ready.Reason = hubv1alpha1.BundlesFailedReason
		ready.Message = fmt.Sprintf("%d of %d ConfigBundles have failed, in %s%s", st.Bundles.Failed, st.Bundles.Total, firstNames(failing), also)
	case len(failedFleetBundles) > 0:
		ready.Reason = hubv1alpha1.FleetBundlesFailedReason
		ready.Message = fmt.Sprintf("%d of %d FleetBundles have failed: %s", st.FleetBundles.Failed, st.FleetBundles.Total, firstNames(failedFleetBundles))
	default:
		ready.Status, ready.Reason = metav1.ConditionTrue, hubv1alpha1.AllReadyReason
		ready.Message = fmt.Sprintf("All %d members Ready, %d of %d ConfigBundles Ready, %d of %d FleetBundles Ready",
			st.Clusters.Total, st.Bundles.Ready, st.Bundles.Total, st.FleetBundles.Ready, st.FleetBundles.Total)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// sumMembers sets the counts of st from the members, and names, sorted, the members not Ready
// (with their reason), those not synced, and those with failed bundles (with their number).
func sumMembers(st *hubv1alpha1.FleetStatus, members []hubv1alpha1.MemberCluster) (notReady, unsynced, failing []string) {
	st.Clusters, st.Bundles, st.Heals = hubv1alpha1.ClusterCounts{}, hubv1alpha1.BundleCounts{}, 0
	for _, mc := range members {
		st.Clusters.Total++
		if mc.Spec.Paused {
			st.Clusters.Paused++
		}
		if c := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
			st.Clusters.Ready++
		} else {
			reason := "Unknown"
			if c != nil {
				reason = c.Reason
			}
			notReady = append(notReady, mc.Name+" ("+reason+")")
		}
		if syncing(mc.Status) {
			unsynced = append(unsynced, mc.Name)
		}
		st.Bundles.Total += mc.Status.Bundles.Total
		st.Bundles.Ready += mc.Status.Bundles.Ready
		st.Bundles.Failed += mc.Status.Bundles.Failed
		st.Bundles.Placed += mc.Status.Bundles.Placed
		st.Bundles.Drifted += mc.Status.Bundles.Drifted
		st.Heals += mc.Status.Heals
		if n := mc.Status.Bundles.Failed; n > 0 {
			failing = append(failing, fmt.Sprintf("%s (%d)", mc.Name, n))
		}
	}
	slices.Sort(notReady)
	slices.Sort(unsynced)
	slices.Sort(failing)
	return notReady, unsynced, failing
}

// firstNames joins the first hubv1alpha1.MaxNamedMembers of names and says how many more there
// are.
func firstNames(names []string) string {
	if len(names) <= hubv1alpha1.MaxNamedMembers {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:hubv1alpha1.MaxNamedMembers], ", "), len(names)-hubv1alpha1.MaxNamedMembers)
}
