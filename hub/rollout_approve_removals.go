package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// approveRemovals approves the removals the FleetBundle key holds: it adds an entry naming the
// held removal set and the caller to spec.rollout.removalApprovals, with a JSON merge patch that
// carries the FleetBundle's resourceVersion (read again, and the approval retried, on a conflict).
func approveRemovals(ctx context.Context, c client.Client, key types.NamespacedName, out io.Writer) error {
	username, err := whoAmI(ctx, c)
	if err != nil {
		return failed(err)
	}
	var msg string
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		msg, err = approveRemovalsOnce(ctx, c, key, username)
		return err
	})
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return err
		}
		return failed(fmt.Errorf("approving the removals of FleetBundle %s: %w", key, err))
	}
	fmt.Fprintln(out, msg)
	return nil
}

// approveRemovalsOnce reads the FleetBundle key and approves the removal set it holds in the name
// of user; it returns what to print.
func approveRemovalsOnce(ctx context.Context, c client.Client, key types.NamespacedName, user string) (string, error) {
	fb := &hubv1alpha1.FleetBundle{}
	if err := c.Get(ctx, key, fb); err != nil {
		return "", failed(fleetBundleError(key, err))
	}
	var held *hubv1alpha1.RemovalStatus
	if fb.Status.Rollout != nil {
		held = fb.Status.Rollout.Removals
	}
	if fb.Spec.Rollout == nil || held == nil || held.RemovalSet == "" {
		return "", failed(fmt.Errorf("FleetBundle %s holds no removal: nothing to approve", key))
	}
	approvals := fb.Spec.Rollout.RemovalApprovals
	if slices.ContainsFunc(approvals, func(a hubv1alpha1.RemovalApproval) bool { return a.RemovalSet == held.RemovalSet }) {
		return fmt.Sprintf("%s/%s removals %s approved already", fleetBundleResource, key.Name, held.RemovalSet), nil
	}
	if !held.Held {
		return "", failed(fmt.Errorf("FleetBundle %s holds no removal (%d pending, proceeding): nothing to approve", key, held.Pending))
	}
	patch := client.MergeFromWithOptions(fb.DeepCopy(), client.MergeFromWithOptimisticLock{})
	approvals = append(slices.Clone(approvals), hubv1alpha1.RemovalApproval{RemovalSet: held.RemovalSet, ApprovedBy: user})
	fb.Spec.Rollout.RemovalApprovals = approvals[max(0, len(approvals)-hubv1alpha1.MaxRemovalApprovals):]
	if err := c.Patch(ctx, fb, patch); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s removals approved: %d members lose the bundle, in stage order (removal set %s)",
		fleetBundleResource, key.Name, held.Pending, held.RemovalSet), nil
}
