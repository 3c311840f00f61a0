package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/tenancy"
)

// With sharded replicas, no replica sees every member: each writes its share of a FleetBundle's
// status (status.replicas, one entry per replica, applied server-side under a field manager of
// its own, so that the replicas' writes never overwrite each other), and the replica elected
// for the hub-wide work sums the shares of the live replicas into the status users read, and
// holds the finalizer until no live replica reports a member holding the bundle.

// reconcileShare writes this replica's share of the FleetBundle's status if it changed and, on
// the elected replica, the totals and the finalizer.
func (r *StatusReconciler) reconcileShare(ctx context.Context, fb *hubv1alpha1.FleetBundle) (ctrl.Result, error) {
	pending := r.ledger.pendingHeals(fb.UID)
	boundary, err := tenancy.ReadBoundary(ctx, r.hub, fb)
	if err != nil {
		return ctrl.Result{}, err
	}
	mine, holds, err := r.selectedMembers(ctx, fb, boundary) // the elected replica prunes, from the status
	if err != nil {
		return ctrl.Result{}, err
	}
	revs, err := rollout.ListRevisions(ctx, r.hub, fb)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	tally := shareTally(fb, r.rolloutMembers(fb, mine, now), now)
	var failed map[string]hubv1alpha1.ClusterFailure
	if tally != nil {
		failed = tally.Failed
	}
	health := judgeAll(fb, (&rolloutState{revisions: revs}).byNumber(), mine, failed)
	if fb.DeletionTimestamp.IsZero() {
		r.transitions.observe(fb, health)
	}
	prev := shareOf(fb.Status.Replicas, r.opts.Replica.ID)
	share := shareFrom(fb, r.opts.Replica.ID, mine, health, prev, pending)
	share.Rollout = replicaRollout(fb, tally)
	share.HeldRevisions = rollout.RecordHeld(holds)
	var res ctrl.Result
	if tally != nil {
		res.RequeueAfter = tally.RequeueAfter // a progress deadline ends
	}
	if prev == nil || !equality.Semantic.DeepEqual(*prev, share) {
		key := client.ObjectKeyFromObject(fb)
		urgent := prev == nil || prev.Clusters.Failed != share.Clusters.Failed || !equality.Semantic.DeepEqual(prev.Rollout, share.Rollout)
		if wait := r.shareWrites.Take(key, urgent); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if err := r.applyShare(ctx, fb, share); err != nil {
			return ctrl.Result{}, err
		}
		r.ledger.noteHealsWritten(fb.UID, pending)
		return res, nil // the write comes back as an event, for the totals
	}
	if !r.leading() {
		return res, nil
	}
	totals, err := r.reconcileTotals(ctx, fb, boundary)
	if res.RequeueAfter > 0 && (totals.RequeueAfter == 0 || res.RequeueAfter < totals.RequeueAfter) {
		totals.RequeueAfter = res.RequeueAfter // this replica's own members' progress deadlines
	}
	return totals, err
}

// shareTally counts this replica's members for the rollout the FleetBundle's status names; nil
// without one.
func shareTally(fb *hubv1alpha1.FleetBundle, mine []rollout.Member, now time.Time) *rollout.Tally {
	s, ro := fb.Spec.Rollout, fb.Status.Rollout
	if s == nil || ro == nil || fb.Status.UpdateRevision == 0 {
		return nil
	}
	t := rollout.TallyMembers(s, fb.Status.UpdateRevision, rollout.Where{Stage: slices.Index(rollout.StageNames(s), ro.Stage),
		AdmittedThrough: ro.AdmittedThrough, Soaking: ro.Phase == hubv1alpha1.RolloutSoaking}, mine, now)
	return &t
}

// replicaRollout is a replica's share of a rollout, from its tally.
func replicaRollout(fb *hubv1alpha1.FleetBundle, t *rollout.Tally) *hubv1alpha1.ReplicaRolloutStatus {
	if t == nil {
		return nil
	}
	out := &hubv1alpha1.ReplicaRolloutStatus{UpdateRevision: fb.Status.UpdateRevision, Stage: fb.Status.Rollout.Stage,
		AdmittedThrough: fb.Status.Rollout.AdmittedThrough, Failed: int32(t.FailedCount)}
	for _, c := range t.Stages {
		out.Stages = append(out.Stages, hubv1alpha1.StageTally{Done: c.Done, InFlight: c.InFlight})
	}
	for _, name := range slices.Sorted(maps.Keys(t.Failed)) {
		if len(out.FailedClusters) == hubv1alpha1.MaxFailedClusters {
			break
		}
		out.FailedClusters = append(out.FailedClusters, t.Failed[name])
	}
	return out
}

// SumTallies sums the live replicas' counts of the rollout the FleetBundle's status names, or
// returns nil if a share counted another revision, stage or admittedThrough, or counted none
// (the replicas have not caught up with the status yet: nothing may be decided from them).
func SumTallies(fb *hubv1alpha1.FleetBundle, shares []hubv1alpha1.FleetBundleReplicaStatus) *rollout.Tally {
	s, ro := fb.Spec.Rollout, fb.Status.Rollout
	if s == nil || ro == nil || len(shares) == 0 {
		return nil
	}
	t := &rollout.Tally{Failed: map[string]hubv1alpha1.ClusterFailure{}, Stages: make([]rollout.StageCount, len(s.Stages)+1)}
	for _, share := range shares {
		sr := share.Rollout
		if sr == nil || share.ObservedGeneration != fb.Generation || sr.UpdateRevision != fb.Status.UpdateRevision ||
			sr.Stage != ro.Stage || sr.AdmittedThrough != ro.AdmittedThrough || len(sr.Stages) != len(t.Stages) {
			return nil
		}
		for i, c := range sr.Stages {
			t.Stages[i].Done += c.Done
			t.Stages[i].InFlight += c.InFlight
		}
		t.FailedCount += int(sr.Failed)
		for _, f := range sr.FailedClusters {
			t.Failed[f.Cluster] = f
		}
	}
	return t
}

// Share computes one replica's share of a FleetBundle's status from the selected members it
// manages (in any order), its previous share (nil if none) and the heals not yet counted in it.
func Share(fb *hubv1alpha1.FleetBundle, replica string, mine []MemberView, prev *hubv1alpha1.FleetBundleReplicaStatus, pendingHeals int64) hubv1alpha1.FleetBundleReplicaStatus {
	return shareFrom(fb, replica, mine, judgeAll(fb, nil, mine, nil), prev, pendingHeals)
}

// shareFrom is Share from the judgement of each of mine (judgeAll).
func shareFrom(fb *hubv1alpha1.FleetBundle, replica string, mine []MemberView, health []Health, prev *hubv1alpha1.FleetBundleReplicaStatus, pendingHeals int64) hubv1alpha1.FleetBundleReplicaStatus {
	st := statusOf(fb, tenancy.Boundary{}, health, 0, metav1.Time{}) // its counts; the totals' Ready is the elected replica's
	share := hubv1alpha1.FleetBundleReplicaStatus{
		Replica: replica, ObservedGeneration: fb.Generation,
		Clusters: st.Clusters, FailedClusters: st.FailedClusters, DriftedClusters: st.DriftedClusters, Heals: pendingHeals,
	}
	if prev != nil {
		share.Heals += prev.Heals
	}
	key := client.ObjectKeyFromObject(fb)
	for _, m := range mine {
		if m.NotReady.Reason == "" && !m.Paused && OwnershipOf(m.Bundle, key, fb.UID) == Own {
			share.Holding++
		}
	}
	return share
}

// Totals computes the status of a FleetBundle from where it may place (boundary), the shares of
// the live replicas and the number of members it selects, at now: the counts of the shares computed for the
// FleetBundle's generation, the first failed members of all, the heals of all, and the Ready
// condition of the sum. A selected member in no share (its replica is gone, its new one has
// not reported yet) is neither ready nor failed: the FleetBundle is Progressing until it is.
func Totals(fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, shares []hubv1alpha1.FleetBundleReplicaStatus, selected int32, now metav1.Time) hubv1alpha1.FleetBundleStatus {
	st := hubv1alpha1.FleetBundleStatus{
		ObservedGeneration: fb.Generation,
		Replicas:           shares,
		CurrentRevision:    fb.Status.CurrentRevision,
		UpdateRevision:     fb.Status.UpdateRevision,
		Rollout:            fb.Status.Rollout.DeepCopy(),
		ObservedRevision:   fb.Status.ObservedRevision,
		HeldRevisions:      slices.Clone(fb.Status.HeldRevisions),
		Conditions:         slices.Clone(fb.Status.Conditions),
	}
	st.Clusters.Selected = selected
	var failures []hubv1alpha1.ClusterFailure
	var drifted []string
	for _, s := range shares {
		st.Heals += s.Heals
		if s.ObservedGeneration != fb.Generation {
			continue // counted for another template
		}
		st.Clusters.Paused += s.Clusters.Paused
		st.Clusters.Applied += s.Clusters.Applied
		st.Clusters.Ready += s.Clusters.Ready
		st.Clusters.Updated += s.Clusters.Updated
		st.Clusters.Failed += s.Clusters.Failed
		st.Clusters.Drifted += s.Clusters.Drifted
		failures = append(failures, s.FailedClusters...)
		drifted = append(drifted, s.DriftedClusters...)
	}
	st.DriftedClusters = firstDrifted(drifted)
	finish(fb, boundary, &st, failures, now) // the first failures of all are among the first of each share
	return st
}

// reconcileTotals (on the elected replica) adds the finalizer, writes the totals of the live
// replicas' shares and drops the others, or releases a FleetBundle being deleted; boundary is
// where the FleetBundle may place.
func (r *StatusReconciler) reconcileTotals(ctx context.Context, fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary) (ctrl.Result, error) {
	setFleetBundleMetrics(fb)
	live := r.opts.Replica.LiveReplicas()
	var shares []hubv1alpha1.FleetBundleReplicaStatus
	for _, s := range fb.Status.Replicas {
		if slices.Contains(live, s.Replica) {
			shares = append(shares, s)
		}
	}
	if !fb.DeletionTimestamp.IsZero() {
		return r.releaseShared(ctx, fb, shares)
	}
	if !controllerutil.ContainsFinalizer(fb, hubv1alpha1.PlacementFinalizer) {
		controllerutil.AddFinalizer(fb, hubv1alpha1.PlacementFinalizer)
		return r.patchFinalizers(ctx, fb)
	}
	members, err := r.memberNames(ctx, fb, boundary)
	if err != nil {
		return ctrl.Result{}, err
	}
	ro, err := r.rolloutOf(ctx, fb, members, time.Now(), SumTallies(fb, shares))
	if err != nil {
		return ctrl.Result{}, err
	}
	ro.keepHeld(sharesHeld(fb, shares, len(members)))
	want := Totals(ro.next, boundary, shares, int32(len(members)), metav1.Now())
	reportSourceError(fb, &want, ro.sourceErr)
	res, _, err := r.writeStatus(ctx, fb, want, ro)
	return res, err
}

// sharesHeld are the revisions the live replicas' shares say their members hold and, unless
// every share was computed for the FleetBundle's generation and together they count every one of
// its selected members, those its status recorded (a replica gone, or one not yet caught up,
// may have had a member holding a revision no share names).
func sharesHeld(fb *hubv1alpha1.FleetBundle, shares []hubv1alpha1.FleetBundleReplicaStatus, selected int) map[int64]bool {
	held := map[int64]bool{}
	counted, current := 0, true
	for _, s := range shares {
		for _, n := range s.HeldRevisions {
			held[n] = true
		}
		counted += int(s.Clusters.Selected)
		current = current && s.ObservedGeneration == fb.Generation
	}
	if !current || counted < selected {
		for _, n := range fb.Status.HeldRevisions {
			held[n] = true
		}
	}
	return held
}

// memberNames is what the elected replica knows of each member the FleetBundle selects (within
// boundary), whoever manages it: its name, its stage, whether it is paused, and whether its
// MemberCluster is Ready (a paused one counts as not Ready, and not joining: the rollout skips
// it).
func (r *StatusReconciler) memberNames(ctx context.Context, fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary) ([]rollout.Member, error) {
	list := &hubv1alpha1.MemberClusterList{}
	if err := r.hub.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing MemberClusters: %w", err)
	}
	var members []rollout.Member
	for _, mc := range list.Items {
		if !boundary.Selects(fb, mc.Labels) {
			continue
		}
		ready := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
		m := rollout.Member{Name: mc.Name, Ready: !mc.Spec.Paused && ready != nil && ready.Status == metav1.ConditionTrue,
			Joining: !mc.Spec.Paused && (ready == nil || joining(ready.Reason)), Paused: mc.Spec.Paused}
		if fb.Spec.Rollout != nil {
			m.Stage = rollout.StageOf(fb.Spec.Rollout, mc.Labels)
		}
		members = append(members, m)
	}
	return members, nil
}

// releaseShared removes the finalizer of a FleetBundle being deleted once no live replica
// reports a connected member holding its bundle (as release does for one replica).
func (r *StatusReconciler) releaseShared(ctx context.Context, fb *hubv1alpha1.FleetBundle, shares []hubv1alpha1.FleetBundleReplicaStatus) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fb, hubv1alpha1.PlacementFinalizer) {
		return ctrl.Result{}, nil
	}
	for _, s := range shares {
		if s.Holding > 0 {
			// Its removal comes back as a share; the requeue is a safety net.
			return ctrl.Result{RequeueAfter: r.opts.NotConnectedRetry}, nil
		}
	}
	controllerutil.RemoveFinalizer(fb, hubv1alpha1.PlacementFinalizer)
	res, err := r.patchFinalizers(ctx, fb)
	if err == nil {
		r.ledger.forgetFleetBundle(client.ObjectKeyFromObject(fb), fb.UID)
		ctrl.LoggerFrom(ctx).Info("Released FleetBundle")
	}
	return res, err
}

// applyShare writes this replica's entry of status.replicas, and nothing else, server-side
// under the replica's own field manager.
func (r *StatusReconciler) applyShare(ctx context.Context, fb *hubv1alpha1.FleetBundle, share hubv1alpha1.FleetBundleReplicaStatus) error {
	entry, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&share)
	if err != nil {
		return fmt.Errorf("encoding the share: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": hubv1alpha1.GroupVersion.String(),
		"kind":       "FleetBundle",
		"metadata":   map[string]any{"name": fb.Name, "namespace": fb.Namespace},
		"status":     map[string]any{"replicas": []any{entry}},
	}}
	err = r.hub.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(shareFieldOwner(r.opts.FieldOwner, share.Replica)), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("writing this replica's share of the FleetBundle status: %w", err)
	}
	return nil
}

// shareFieldOwner is the field manager of one replica's share: the hub's, with the replica's
// id, hashed if that would exceed the 128 characters of a field manager.
func shareFieldOwner(owner, replica string) string {
	if m := owner + "/" + replica; len(m) <= 128 {
		return m
	}
	sum := sha256.Sum256([]byte(replica))
	return owner + "/" + hex.EncodeToString(sum[:16])
}

// shareOf returns a replica's share, or nil.
func shareOf(shares []hubv1alpha1.FleetBundleReplicaStatus, replica string) *hubv1alpha1.FleetBundleReplicaStatus {
	for i := range shares {
		if shares[i].Replica == replica {
			return &shares[i]
		}
	}
	return nil
}

// leading reports whether this replica is the elected one (and certainly holds its Lease).
func (r *StatusReconciler) leading() bool { return r.opts.Replica.Leading() }

// electedSource enqueues every FleetBundle each time this replica is elected: the totals and the
// finalizers are its work from then on, and what changed while another replica did it, or none
// did, is caught up at once.
func (r *StatusReconciler) electedSource() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		r.opts.Replica.OnElected(func() {
			if ctx.Err() != nil {
				return
			}
			list := &hubv1alpha1.FleetBundleList{}
			if err := r.hub.List(ctx, list); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing FleetBundles on election failed; their totals wait for their next event")
				return
			}
			for _, fb := range list.Items {
				q.Add(mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fb)}})
			}
		})
		return nil
	})
}
