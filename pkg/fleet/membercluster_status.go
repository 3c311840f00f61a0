package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/registration"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// maxFailedBundleMessage bounds the message of an entry of status.failedBundles.
const maxFailedBundleMessage = 1024

// status computes the status of the MemberCluster mc at now. The counts come from the member's
// cache while the member is counted; otherwise the last ones stay, with the lastSeenTime they
// were observed at. The Paused condition follows mc's spec.paused, the Synced condition the
// reconciler's progress (Options.Sync).
func (r *MemberClusterReconciler) status(ctx context.Context, mc *hubv1alpha1.MemberCluster, state spokeprovider.State, now time.Time) hubv1alpha1.MemberClusterStatus {
	name, current := mc.Name, mc.Status
	st := *current.DeepCopy()
	ready := metav1.Condition{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: state.Reason, Message: state.Message}
	if state.Ready {
		ready.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, credentialsCondition(state, r.renewal(name), now, r.opts.CredentialsExpiryWarning))
	meta.SetStatusCondition(&st.Conditions, pausedCondition(mc.Spec.Paused))
	if r.opts.Sync != nil {
		meta.SetStatusCondition(&st.Conditions, syncedCondition(r.opts.Sync(multicluster.ClusterName(name))))
	}
	if g := state.Guard; g.Status != "" {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hubv1alpha1.GuardedCondition, Status: g.Status, Reason: g.Reason, Message: g.Message})
	}
	st.CredentialsExpiry = nil
	if !state.CredentialsExpiry.IsZero() {
		st.CredentialsExpiry = &metav1.Time{Time: state.CredentialsExpiry}
	}
	if state.KubernetesVersion != "" {
		st.KubernetesVersion = state.KubernetesVersion
	}
	if state.ClusterID != "" {
		st.ClusterID = state.ClusterID
	}
	if counted(state) {
		if counts, failed, heals, err := r.count(ctx, name); err == nil {
			st.Bundles, st.FailedBundles, st.Heals = counts, failed, heals
		}
	}
	st.Replica = r.opts.Replica.ID
	if !state.LastSeen.IsZero() {
		seen := metav1.NewTime(state.LastSeen.Truncate(time.Second))
		// Written with any other change, never alone: a steady state writes nothing, and the
		// Fleet's heartbeat says the hub is still watching a member that stays Ready.
		if st.LastSeenTime == nil || !equality.Semantic.DeepEqual(st, current) {
			st.LastSeenTime = &seen
		}
	}
	return st
}

// counted reports whether a member's bundles are counted from its cache: while it is Ready;
// while it is Forbidden, when the hub may still hold its cache and the bundles whose outcome the
// member forbade the hub to write (Options.Unreported) are to be counted as failed; and while it
// is CRDMissing, when its cache loses the bundles that the CRD's deletion deletes, so that the
// counts drop with them. An unreachable member keeps the counts last observed.
func counted(state spokeprovider.State) bool {
	return state.Ready || state.Reason == hubv1alpha1.ForbiddenReason || state.Reason == hubv1alpha1.CRDMissingReason
}

// pausedCondition says whether the member is paused (spec.paused): True (Paused) while it is,
// and placement writes nothing to it; False (NotPaused) otherwise. Ready does not depend on it.
func pausedCondition(paused bool) metav1.Condition {
	if paused {
		return metav1.Condition{Type: hubv1alpha1.PausedCondition, Status: metav1.ConditionTrue, Reason: hubv1alpha1.PausedReason,
			Message: "spec.paused is set: placement writes nothing to the member, whose bundles are still enforced and healed, until it is resumed"}
	}
	return metav1.Condition{Type: hubv1alpha1.PausedCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.NotPausedReason,
		Message: "Placement proceeds in the member"}
}

// syncedCondition says whether the first full reconcile of the member since it connected has
// finished: True (AllReconciled) once it has, False (Syncing) with the count left until then,
// and while the member is not connected.
func syncedCondition(s configbundle.Sync) metav1.Condition {
	c := metav1.Condition{Type: hubv1alpha1.SyncedCondition, Status: metav1.ConditionFalse, Reason: hubv1alpha1.SyncingReason}
	switch {
	case !s.Connected:
		c.Message = "The member is not connected: its ConfigBundles are reconciled once it connects"
	case s.Left > 0:
		c.Message = fmt.Sprintf("%d of %d ConfigBundles left to reconcile since the member connected", s.Left, s.Total)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, hubv1alpha1.AllReconciledReason
		c.Message = fmt.Sprintf("All %d ConfigBundles the member held when it connected have been reconciled since", s.Total)
	}
	return c
}

// syncing reports whether a status says its member is Syncing.
func syncing(st hubv1alpha1.MemberClusterStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, hubv1alpha1.SyncedCondition)
	return c != nil && c.Status != metav1.ConditionTrue
}

// renewal is the renewal of the member's credential, nil if the hub does not renew it.
func (r *MemberClusterReconciler) renewal(member string) *registration.Renewal {
	if r.opts.Renewal == nil {
		return nil
	}
	if s, ok := r.opts.Renewal(member); ok {
		return &s
	}
	return nil
}

// credentialsCondition says whether the member's credential is valid for longer than warning,
// or, if the hub renews it (renewal not nil), whether its last renewal succeeded.
func credentialsCondition(state spokeprovider.State, renewal *registration.Renewal, now time.Time, warning time.Duration) metav1.Condition {
	c := metav1.Condition{Type: hubv1alpha1.CredentialsValidCondition}
	exp := state.CredentialsExpiry
	renewed := renewal != nil && !exp.IsZero() && now.Before(exp)
	switch {
	case renewed && renewal.Err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, hubv1alpha1.RenewalFailedReason
		c.Message = fmt.Sprintf("Renewing the credential failed: %v; it expires at %s; the hub retries, and register the member again if it keeps failing",
			renewal.Err, exp.UTC().Format(time.RFC3339))
	case renewed:
		c.Status, c.Reason = metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason
		c.Message = fmt.Sprintf("The credential expires at %s; the hub renews it at %s", exp.UTC().Format(time.RFC3339), renewal.Next.UTC().Format(time.RFC3339))
	case exp.IsZero() && state.ClusterID == "":
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, hubv1alpha1.ExpiryUnknownReason, "Not connected yet"
	case exp.IsZero():
		c.Status, c.Reason = metav1.ConditionUnknown, hubv1alpha1.ExpiryUnknownReason
		c.Message = "The credential does not say when it expires"
	case !now.Before(exp):
		c.Status, c.Reason = metav1.ConditionFalse, hubv1alpha1.ExpiredReason
		c.Message = fmt.Sprintf("The credential expired at %s; register the member again to renew it", exp.UTC().Format(time.RFC3339))
	case exp.Sub(now) <= warning:
		c.Status, c.Reason = metav1.ConditionFalse, hubv1alpha1.ExpiresSoonReason
		c.Message = fmt.Sprintf("The credential expires at %s, within %s; register the member again to renew it", exp.UTC().Format(time.RFC3339), warning)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, hubv1alpha1.CredentialsValidReason
		c.Message = fmt.Sprintf("The credential expires at %s", exp.UTC().Format(time.RFC3339))
	}
	return c
}

// count counts a member's bundles from its cache, without copying them, and lists the first
// failing ones.
func (r *MemberClusterReconciler) count(ctx context.Context, name string) (hubv1alpha1.BundleCounts, []hubv1alpha1.FailedBundle, int64, error) {
	cl, err := r.members.Get(ctx, multicluster.ClusterName(name))
	if err != nil {
		return hubv1alpha1.BundleCounts{}, nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.CountTimeout)
	defer cancel()
	list := &configbundlev1alpha1.ConfigBundleList{}
	if err := cl.GetCache().List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return hubv1alpha1.BundleCounts{}, nil, 0, err
	}
	var unreported map[types.NamespacedName]metav1.Condition
	if r.opts.Unreported != nil {
		unreported = r.opts.Unreported(name)
	}
	counts, failed, heals := tally(list.Items, unreported)
	return counts, failed, heals, nil
}

// tally counts bundles by their Ready condition (the one in unreported, where the hub could not
// write it to the bundle's status) and lists the first failing ones. A bundle whose status was
// not computed for its current generation is neither Ready nor failed.
func tally(bundles []configbundlev1alpha1.ConfigBundle, unreported map[types.NamespacedName]metav1.Condition) (hubv1alpha1.BundleCounts, []hubv1alpha1.FailedBundle, int64) {
	var counts hubv1alpha1.BundleCounts
	var failed []hubv1alpha1.FailedBundle
	var heals int64
	for i := range bundles {
		b := &bundles[i]
		counts.Total++
		if _, ok := b.Labels[hubv1alpha1.FleetBundleLabel]; ok {
			counts.Placed++
		}
		heals += b.Status.Heals
		c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		if b.Status.ObservedGeneration != b.Generation {
			c = nil // a status of an earlier spec: neither Ready nor failed
		}
		if u, ok := unreported[client.ObjectKeyFromObject(b)]; ok {
			c = &u // the outcome the hub could not write to the bundle's status
		}
		switch {
		case c == nil:
		case c.Status == metav1.ConditionTrue:
			counts.Ready++
		case c.Status == metav1.ConditionFalse:
			counts.Failed++
			if c.Reason == configbundlev1alpha1.DriftedReason {
				counts.Drifted++
			}
			failed = append(failed, hubv1alpha1.FailedBundle{Namespace: b.Namespace, Name: b.Name, Reason: c.Reason, Message: c.Message})
		}
	}
	return counts, firstFailed(failed), heals
}

// firstFailed sorts failed bundles by namespace and name and keeps the first
// hubv1alpha1.MaxFailedBundles, their messages shortened.
func firstFailed(failed []hubv1alpha1.FailedBundle) []hubv1alpha1.FailedBundle {
	slices.SortFunc(failed, func(a, b hubv1alpha1.FailedBundle) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	failed = failed[:min(len(failed), hubv1alpha1.MaxFailedBundles)]
	for i := range failed {
		failed[i].Message = truncate(failed[i].Message, maxFailedBundleMessage)
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// truncate shortens s to at most n bytes, on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// conditionsOf returns the status and reason of each condition, what a transition changes.
func conditionsOf(st hubv1alpha1.MemberClusterStatus) map[string][2]string {
	out := map[string][2]string{}
	for _, c := range st.Conditions {
		out[c.Type] = [2]string{string(c.Status), c.Reason}
	}
	return out
}
