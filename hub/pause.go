package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// memberClusterResource names a MemberCluster in what pause and resume print, as kubectl does:
// "membercluster.hub.configbundle.dev/NAME".
var memberClusterResource = "membercluster." + hubv1alpha1.GroupVersion.Group

func newPauseCommand() *cobra.Command { return newMemberPauseCommand(true) }

func newResumeCommand() *cobra.Command { return newMemberPauseCommand(false) }

// newMemberPauseCommand returns `hub pause` (pause true) or `hub resume`.
func newMemberPauseCommand(pause bool) *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "pause NAME [flags]",
		Short: "Pause a member for maintenance: placement writes nothing to it until it is resumed",
		Long: `Sets spec.paused of the MemberCluster NAME: the member is frozen at what it holds. Placement writes
nothing to it: no new FleetBundle, no new revision, no removal of what it holds when it stops
being selected or its FleetBundle is deleted, no cleanup. The ConfigBundles it holds are still
enforced and healed, so what it holds stays true, and its connection, probes and reports go on.
Its Ready condition is unchanged; its Paused condition is True. A staged rollout does not update
it; a stage whose members are all paused holds the rollout until one is resumed (unless the
FleetBundle's spec.rollout.skipPausedStages is true).

It exits 0 once the member is paused (also if it was already), 1 if NAME is not a MemberCluster
or the hub cannot be read.`,
		Example: `  hub pause eu-1 --hub-context hub
  kubectl get memberclusters eu-1    # PAUSED true`,
	}
	if !pause {
		cmd.Use = "resume NAME [flags]"
		cmd.Short = "Resume a paused member: placement brings it up to date"
		cmd.Long = `Clears spec.paused of the MemberCluster NAME: placement writes to it again and brings it up to
date. A staged rollout takes it in under its stage's rules: in the current stage it is admitted
within maxConcurrency and soaked; in a stage the rollout passed it gets the revision at once; its
failure counts against maxFailures.

It exits 0 once the member is resumed (also if it was not paused), 1 if NAME is not a
MemberCluster or the hub cannot be read.`
		cmd.Example = `  hub resume eu-1 --hub-context hub`
	}
	cmd.Args = exactlyOneName
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			// Not a member (exit 1), as any NAME the hub has no MemberCluster of: the command
			// line itself is well formed.
			return failed(fmt.Errorf("%q is not a member: no MemberCluster can have that name: %s", name, strings.Join(errs, "; ")))
		}
		// rolloutFlags.client uses the hub flags alone: a client of the hub, its CRDs checked.
		c, err := (&rolloutFlags{clusterFlags: f}).client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), defaultTimeout)
		defer cancel()
		return setMemberPaused(ctx, c, name, pause, cmd.OutOrStdout())
	}
	cmd.Flags().SortFlags = false
	f.bindHub(cmd.Flags())
	return cmd
}

// setMemberPaused sets spec.paused of the MemberCluster name with a JSON merge patch, unless it
// is set so already.
func setMemberPaused(ctx context.Context, c client.Client, name string, pause bool, out io.Writer) error {
	mc := &hubv1alpha1.MemberCluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); apierrors.IsNotFound(err) {
		return failed(fmt.Errorf("no MemberCluster %s on the hub (kubectl get memberclusters lists the members)", name))
	} else if err != nil {
		return failed(fmt.Errorf("reading MemberCluster %s: %w", name, err))
	}
	if mc.Spec.Paused == pause {
		state := "paused already"
		if !pause {
			state = "not paused"
		}
		fmt.Fprintf(out, "%s/%s is %s\n", memberClusterResource, name, state)
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, pause)
	if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, patch)); apierrors.IsNotFound(err) {
		return failed(fmt.Errorf("no MemberCluster %s on the hub: it was deleted meanwhile", name))
	} else if err != nil {
		return failed(fmt.Errorf("setting spec.paused of MemberCluster %s: %w", name, err))
	}
	done := "paused"
	if !pause {
		done = "resumed"
	}
	fmt.Fprintf(out, "%s/%s %s\n", memberClusterResource, name, done)
	return nil
}
