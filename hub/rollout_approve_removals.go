package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// newRolloutApproveRemovalsCommand returns `hub rollout approve NAME --removals`. (`hub rollout
// approve NAME --stage STAGE` approves a stage of a rollout; both flags belong to one verb.)
func newRolloutApproveRemovalsCommand() *cobra.Command {
	var (
		f        rolloutFlags
		removals bool
	)
	cmd := &cobra.Command{
		Use:   "approve NAME --removals [flags]",
		Short: "Approve the removals a FleetBundle holds back (maxRemovals)",
		Long: `With --removals, approves the removals the FleetBundle NAME holds (phase RemovalHeld: a change would
remove its bundle from more members than spec.rollout.maxRemovals): it adds to
spec.rollout.removalApprovals an entry {removalSet, approvedBy} naming the held set
(status.rollout.removals.removalSet) and the caller's username. The removals then proceed, in
stage order. It exits 0 once approved (or if the set was approved already), 1 when the FleetBundle
is missing or holds no removal, 2 on bad usage.`,
		Example: `  hub rollout approve web -n apps --removals`,
		Args:    exactlyOneFleetBundle,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !removals {
			return errors.New("say what to approve: --removals")
		}
		key, err := f.key(args[0])
		if err != nil {
			return err
		}
		c, err := f.client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), defaultTimeout)
		defer cancel()
		return approveRemovals(ctx, c, key, cmd.OutOrStdout())
	}
	f.bind(cmd.Flags())
	cmd.Flags().BoolVar(&removals, "removals", false, "Approve the removals the FleetBundle holds (status.rollout.removals).")
	return cmd
}

// approveRemovals approves the removals the FleetBundle key holds: it adds an entry naming the
// held removal set and the caller to spec.rollout.removalApprovals, with a JSON merge patch that
// carries the FleetBundle's resourceVersion (read again, and the approval retried, on a conflict).
func approveRemovals(ctx context.Context, c client.Client, key types.NamespacedName, out io.Writer) error {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return failed(fmt.Errorf("asking the hub who you are (SelfSubjectReview): %w", err))
	}
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		msg, err = approveRemovalsOnce(ctx, c, key, review.Status.UserInfo.Username)
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
	approvals = append(slices.Clone(approvals), hubv1alpha1.RemovalApproval{RemovalSet: held.RemovalSet, ApprovedBy: user})
	approvals = approvals[max(0, len(approvals)-hubv1alpha1.MaxRemovalApprovals):]
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": fb.ResourceVersion},
		"spec":     map[string]any{"rollout": map[string]any{"removalApprovals": approvals}},
	})
	if err != nil {
		return "", failed(fmt.Errorf("encoding the approval: %w", err))
	}
	if err := c.Patch(ctx, fb, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s removals approved: %d members lose the bundle, in stage order (removal set %s)",
		fleetBundleResource, key.Name, held.Pending, held.RemovalSet), nil
}
