package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/rollout"
)

// approveFlags are the flags of `hub rollout approve`: the rollout flags, and what to approve.
type approveFlags struct {
	rolloutFlags
	stage    string
	removals bool
}

func (f *approveFlags) bind(fs *pflag.FlagSet) {
	f.rolloutFlags.bind(fs)
	fs.StringVar(&f.stage, "stage", "", "The stage of spec.rollout.stages to approve the current updateRevision for (required, but with --removals).")
	fs.BoolVar(&f.removals, "removals", false, "Approve the removals the FleetBundle holds back (phase RemovalHeld, status.rollout.removals) instead of a stage.")
}

// approval is what a `hub rollout approve` command line asks for.
type approval struct {
	key      types.NamespacedName
	stage    string
	removals bool
}

// parse checks the command line (NAME and the flags) and returns what it asks to approve; an
// error is a usage error (exit 2).
func (f *approveFlags) parse(args []string) (approval, error) {
	key, err := f.key(args[0])
	if err != nil {
		return approval{}, err
	}
	switch {
	case f.removals && f.stage != "":
		return approval{}, errors.New("--stage and --removals approve different things: give one")
	case f.removals:
		return approval{key: key, removals: true}, nil
	case f.stage == "":
		return approval{}, errors.New("--stage is required: the stage to approve the rollout for (or --removals, for held removals)")
	}
	if errs := validation.IsDNS1123Label(f.stage); len(errs) > 0 {
		return approval{}, fmt.Errorf("--stage %q is not a stage name: %s", f.stage, strings.Join(errs, "; "))
	}
	return approval{key: key, stage: f.stage}, nil
}

func newRolloutApproveCommand() *cobra.Command {
	var f approveFlags
	cmd := &cobra.Command{
		Use:   "approve NAME (--stage STAGE | --removals) [flags]",
		Short: "Approve a FleetBundle's current revision for a stage that requires approval, or its held removals",
		Long: `Approves status.updateRevision of the FleetBundle NAME for the stage STAGE, which requires approval
(spec.rollout.stages[].requireApproval) and is waiting for it (phase AwaitingApproval): it adds
{revision, stage, approvedBy} to spec.rollout.approvals, approvedBy being your username as the hub's
API server authenticates you (a SelfSubjectReview). The rollout then goes on into the stage.

The spec is patched with the resourceVersion read, so that a change made meanwhile is not
overwritten (it is read again and the approval retried). Approving needs the verb approve on
fleetbundles (ClusterRole configbundle-hub-rollout-approver): the ValidatingAdmissionPolicy
configbundle-hub-approval refuses the approval of anyone else, and any approval in another's name.
When spec.rollout.approvals is full (64), the approvals of the oldest revisions but
updateRevision are dropped to make room.

With --removals, it approves the removals the FleetBundle holds instead (phase RemovalHeld: a change
would remove its bundle from more members than spec.rollout.maxRemovals): it adds to
spec.rollout.removalApprovals an entry {removalSet, approvedBy} naming the held set
(status.rollout.removals.removalSet) and your username. The removals then proceed, in stage order.

It exits 0 once the revision is approved for the stage, or the removals approved (or if they were
already), 1 if the stage is not awaiting approval for updateRevision, no removal is held, or the
FleetBundle does not exist, and 2 on bad usage.`,
		Example: `  hub rollout approve web -n apps --stage prod
  hub rollout approve web -n apps --removals`,
		Args: exactlyOneFleetBundle,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := f.parse(args)
			if err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), defaultTimeout)
			defer cancel()
			if a.removals {
				return approveRemovals(ctx, c, a.key, cmd.OutOrStdout())
			}
			return approveStage(ctx, c, a, cmd.OutOrStdout())
		},
	}
	f.bind(cmd.Flags())
	return cmd
}

// approveStage adds the caller's approval of the FleetBundle's updateRevision for the stage a
// names, with a JSON merge patch that carries the resourceVersion read, reading again and
// retrying on a conflict.
func approveStage(ctx context.Context, c client.Client, a approval, out io.Writer) error {
	username, err := whoAmI(ctx, c)
	if err != nil {
		return failed(err)
	}
	var (
		revision int64
		by       string
	)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fb := &hubv1alpha1.FleetBundle{}
		if err := c.Get(ctx, a.key, fb); err != nil {
			return failed(fleetBundleError(a.key, err))
		}
		revision = fb.Status.UpdateRevision
		if approvedBy, ok := rollout.Approval(fb.Spec.Rollout, revision, a.stage); ok && revision != 0 {
			by = approvedBy
			return nil
		}
		if err := awaitingApproval(fb, a.stage); err != nil {
			return failed(fmt.Errorf("FleetBundle %s: %w", a.key, err))
		}
		patch := client.MergeFromWithOptions(fb.DeepCopy(), client.MergeFromWithOptimisticLock{})
		fb.Spec.Rollout.Approvals = withApproval(fb.Spec.Rollout.Approvals,
			hubv1alpha1.RolloutApproval{Revision: revision, Stage: a.stage, ApprovedBy: username}, revision)
		return c.Patch(ctx, fb, patch)
	})
	switch {
	case err == nil && by != "":
		fmt.Fprintf(out, "%s/%s revision %d is approved for stage %s already (by %s)\n", fleetBundleResource, a.key.Name, revision, a.stage, by)
		return nil
	case err == nil:
		fmt.Fprintf(out, "%s/%s revision %d approved for stage %s by %s\n", fleetBundleResource, a.key.Name, revision, a.stage, username)
		return nil
	case errors.As(err, new(*failure)):
		return err
	default:
		return failed(fmt.Errorf("approving revision %d of FleetBundle %s for stage %s: %w", revision, a.key, a.stage, err))
	}
}

// awaitingApproval says why the rollout of fb is not waiting for an approval for stage, or nil
// if it is.
func awaitingApproval(fb *hubv1alpha1.FleetBundle, stage string) error {
	st, ro := &fb.Status, fb.Status.Rollout
	switch {
	case fb.Spec.Rollout == nil:
		return errors.New("it has no spec.rollout: a change reaches every selected member at once")
	case !slices.ContainsFunc(fb.Spec.Rollout.Stages, func(s hubv1alpha1.RolloutStage) bool { return s.Name == stage }):
		return fmt.Errorf("it has no stage %s in spec.rollout.stages", stage)
	case !rollout.RequiresApproval(fb.Spec.Rollout, stage):
		return fmt.Errorf("stage %s does not require approval (spec.rollout.stages[].requireApproval)", stage)
	case ro == nil || ro.Phase != hubv1alpha1.RolloutAwaitingApproval || ro.Stage != stage:
		phase, at := "-", "-"
		if ro != nil {
			phase, at = cmp.Or(string(ro.Phase), "-"), cmp.Or(ro.Stage, "-")
		}
		return fmt.Errorf("stage %s is not awaiting approval for revision %d: the rollout is %s in stage %s", stage, st.UpdateRevision, phase, at)
	}
	return nil
}

// withApproval adds a to approvals, dropping, while there would be more than MaxApprovals, those
// of the oldest revisions but keep.
func withApproval(approvals []hubv1alpha1.RolloutApproval, a hubv1alpha1.RolloutApproval, keep int64) []hubv1alpha1.RolloutApproval {
	out := append(slices.Clone(approvals), a)
	for len(out) > hubv1alpha1.MaxApprovals {
		oldest := int64(0)
		for _, x := range out {
			if x.Revision != keep && (oldest == 0 || x.Revision < oldest) {
				oldest = x.Revision
			}
		}
		if oldest == 0 {
			break // all of keep: the API server refuses the list, saying so
		}
		out = slices.DeleteFunc(out, func(x hubv1alpha1.RolloutApproval) bool { return x.Revision == oldest })
	}
	return out
}

// whoAmI is the username the hub's API server knows the caller by (a SelfSubjectReview).
func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the hub who you are (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the hub knows you by no username (SelfSubjectReview): an approval must name its approver")
	}
	return review.Status.UserInfo.Username, nil
}
