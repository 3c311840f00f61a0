package placement

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/tenancy"
)

// removalAdmitted reports whether the member's bundle, which the FleetBundle no longer places
// there, may be removed now: at once if the FleetBundle is gone or being deleted, has no
// spec.rollout, or with sharded replicas; otherwise once its status admits it
// (rollout.RemovalAdmitted).
func (s *scope) removalAdmitted() bool {
	if s.fb == nil || !s.fb.DeletionTimestamp.IsZero() || s.r.opts.Replica.Sharded() {
		return true
	}
	return rollout.RemovalAdmitted(s.fb, s.pair.member, s.memberCluster.Labels)
}

// deletionPolicy is the deletionPolicy that applies to the member's bundle b: the FleetBundle's,
// or, for a bundle of a FleetBundle that is gone, the one the bundle records.
func (s *scope) deletionPolicy(b *configbundlev1alpha1.ConfigBundle) hubv1alpha1.DeletionPolicy {
	if s.fb != nil && OwnershipOf(b, s.pair.fb, s.fb.UID) == Own {
		return s.fb.Spec.DeletionPolicy
	}
	return hubv1alpha1.DeletionPolicy(b.Annotations[hubv1alpha1.DeletionPolicyAnnotation])
}

// orphaned finishes the removal of bundle, deleted with the Orphan propagation policy: its
// ConfigMap stays in the member with its content, without the hub's ownership (disown).
func (s *scope) orphaned(ctx context.Context, bundle *configbundlev1alpha1.ConfigBundle) error {
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.disown(ctx, bundle) }); err != nil {
		s.outcome = failed("orphaning", err)
		return fmt.Errorf("orphaning ConfigMap %s/%s: %w", bundle.Namespace, bundle.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Orphaned placed bundle", "configMap", bundle.Namespace+"/"+bundle.Name)
	if s.fb != nil {
		s.r.recorder.Eventf(s.fb, nil, corev1.EventTypeNormal, hubv1alpha1.OrphanedEvent, "Orphan",
			"Member %s: deleted the placed ConfigBundle %s/%s and left ConfigMap %s/%s there with its content, without the hub's ownership",
			s.pair.member, bundle.Namespace, bundle.Name, bundle.Namespace, bundle.Name)
	}
	return nil
}

// disown removes from the ConfigMap of bundle, as the member's API server holds it, the
// ownerReference to bundle and the hub's labels and annotations (HubPrefix, GuardLabel).
func (s *scope) disown(ctx context.Context, bundle *configbundlev1alpha1.ConfigBundle) error {
	cm := &corev1.ConfigMap{}
	switch err := s.member.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(bundle), cm); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	if !disowned(cm, bundle) {
		return nil
	}
	return s.member.GetClient().Update(ctx, cm, client.FieldOwner(s.r.opts.FieldOwner))
}

// disowned removes from cm the ownerReference to bundle and the hub's labels and annotations,
// and reports whether it had any.
func disowned(cm *corev1.ConfigMap, bundle *configbundlev1alpha1.ConfigBundle) bool {
	n := len(cm.OwnerReferences) + len(cm.Labels) + len(cm.Annotations)
	cm.OwnerReferences = slices.DeleteFunc(cm.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == bundle.UID })
	for _, m := range []map[string]string{cm.Labels, cm.Annotations} {
		maps.DeleteFunc(m, func(k, _ string) bool {
			return strings.HasPrefix(k, hubv1alpha1.HubPrefix) || k == configbundlev1alpha1.GuardLabel
		})
	}
	return n != len(cm.OwnerReferences)+len(cm.Labels)+len(cm.Annotations)
}

// finishOrphaning disowns the ConfigMap of bundle, being deleted with the Orphan propagation
// policy, if the member's cache still shows the hub's ownership on it: a disown that failed
// right after the deletion is done by a later reconcile of the pair.
func (s *scope) finishOrphaning(ctx context.Context, bundle *configbundlev1alpha1.ConfigBundle) error {
	cm := &corev1.ConfigMap{}
	if err := s.member.GetClient().Get(ctx, client.ObjectKeyFromObject(bundle), cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !disowned(cm.DeepCopy(), bundle) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.disown(ctx, bundle) })
}

// orphaning reports whether b is a bundle deleted with the Orphan propagation policy, whose
// deletion the garbage collector finishes once it orphaned the ConfigMap: it no longer holds
// a FleetBundle back.
func orphaning(b *configbundlev1alpha1.ConfigBundle) bool {
	return b != nil && !b.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(b, metav1.FinalizerOrphanDependents)
}

// decideRemovals decides, for a FleetBundle with spec.rollout, where the removal of its bundle
// from the members that hold it and are no longer selected stands (rollout.DecideRemovals), into
// the rollout state ro. A FleetBundle whose selector or template is invalid removes nothing: its
// removals are not decided until it is fixed.
func (r *StatusReconciler) decideRemovals(ctx context.Context, fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, ro *rolloutState, now time.Time) error {
	if fb.Spec.Rollout == nil || ro.next.Status.Rollout == nil || !fb.DeletionTimestamp.IsZero() || specError(fb) != nil {
		return nil
	}
	pending, holders, first, err := r.pendingRemovals(ctx, fb, boundary)
	if err != nil {
		return err
	}
	var cause string
	if first != nil {
		sets := &hubv1alpha1.ClusterSetList{}
		if err := r.hub.List(ctx, sets); err != nil {
			return fmt.Errorf("listing ClusterSets: %w", err)
		}
		cause = removalCause(fb, boundary, sets.Items, first)
	}
	var prev *hubv1alpha1.RemovalStatus
	if fb.Status.Rollout != nil {
		prev = fb.Status.Rollout.Removals
	}
	d := rollout.DecideRemovals(rollout.RemovalInput{Strategy: fb.Spec.Rollout, Status: prev, Pending: pending, Holders: holders,
		Cause: cause, Revision: ro.next.Status.UpdateRevision, Now: now})
	rollout.WithRemovals(ro.next.Status.Rollout, d)
	ro.decision.Events = append(ro.decision.Events, d.Events...)
	if d.RequeueAfter > 0 && (ro.decision.RequeueAfter == 0 || d.RequeueAfter < ro.decision.RequeueAfter) {
		ro.decision.RequeueAfter = d.RequeueAfter
	}
	return nil
}

// pendingRemovals returns the members that hold the FleetBundle's bundle and are no longer
// selected (within boundary), how many members hold it, and the MemberCluster of the first
// pending one (by name). Only the connected members that are not paused count: a paused member
// keeps what it holds; one that cannot be seen is not known to hold anything.
func (r *StatusReconciler) pendingRemovals(ctx context.Context, fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary) ([]rollout.Removal, int, *hubv1alpha1.MemberCluster, error) {
	list := &hubv1alpha1.MemberClusterList{}
	if err := r.hub.List(ctx, list); err != nil {
		return nil, 0, nil, fmt.Errorf("listing MemberClusters: %w", err)
	}
	key := client.ObjectKeyFromObject(fb)
	var pending []rollout.Removal
	var first *hubv1alpha1.MemberCluster
	holders := 0
	for i, mc := range list.Items {
		if mc.Spec.Paused || !r.opts.Replica.Owns(mc.Name) || r.members.Connected(multicluster.ClusterName(mc.Name)) != nil {
			continue
		}
		b, err := r.readBundle(ctx, mc.Name, key)
		if err != nil || OwnershipOf(b, key, fb.UID) != Own || !b.DeletionTimestamp.IsZero() {
			continue
		}
		holders++
		if boundary.Selects(fb, mc.Labels) {
			continue
		}
		pending = append(pending, rollout.Removal{Name: mc.Name, Stage: rollout.StageOf(fb.Spec.Rollout, mc.Labels)})
		if first == nil || mc.Name < first.Name {
			first = &list.Items[i]
		}
	}
	return pending, holders, first, nil
}

// removalCause says, as well as the hub can tell, why a FleetBundle no longer selects a member
// (mc) that holds its bundle: a ClusterSet that selects the member is no longer bound, or no
// longer named by spec.clusterSets; or the member is in a bound set, and its clusterSelector or
// the member's labels changed; or it is in no bound set.
func removalCause(fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, sets []hubv1alpha1.ClusterSet, mc *hubv1alpha1.MemberCluster) string {
	if boundary.Contains(mc.Labels) {
		return fmt.Sprintf("spec.clusterSelector no longer selects member %s (the selector or the member's labels changed)", mc.Name)
	}
	// The most specific set first: one that selects every member is the weakest guess.
	specificity := func(s hubv1alpha1.ClusterSet) int {
		return len(s.Spec.ClusterSelector.MatchLabels) + len(s.Spec.ClusterSelector.MatchExpressions)
	}
	slices.SortFunc(sets, func(a, b hubv1alpha1.ClusterSet) int {
		if c := specificity(b) - specificity(a); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, set := range sets {
		if ok, err := fleetbundle.Selects(&set.Spec.ClusterSelector, mc.Labels); err != nil || !ok {
			continue
		}
		switch {
		case slices.Contains(boundary.Unnamed, set.Name):
			return fmt.Sprintf("spec.clusterSets no longer names ClusterSet %s", set.Name)
		case len(fb.Spec.ClusterSets) > 0 && !slices.Contains(fb.Spec.ClusterSets, set.Name):
			continue
		default:
			return fmt.Sprintf("the binding %s/%s was deleted", fb.Namespace, set.Name)
		}
	}
	if len(boundary.Missing) > 0 {
		return fmt.Sprintf("ClusterSet %s was deleted", fleetbundle.ListNames(boundary.Missing))
	}
	return fmt.Sprintf("member %s is no longer in a ClusterSet bound to namespace %s (a ClusterSet or the member's labels changed)", mc.Name, fb.Namespace)
}
