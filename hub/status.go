package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleet"
	"configbundle.dev/hub/pkg/hubmanager"
)

// defaultMaxAge is the default of `hub status --max-age`: three heartbeats.
const defaultMaxAge = 30 * time.Second

// fleetStatus prints the Fleet and its members and returns nil if the Fleet is Ready and a hub
// confirmed it less than maxAge ago (fleet.Gate), else the reason it is not.
func fleetStatus(ctx context.Context, cfg *rest.Config, maxAge time.Duration, out io.Writer) error {
	scheme, err := hubmanager.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("building a client for the hub: %w", err)
	}
	f := &hubv1alpha1.Fleet{}
	if err := c.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, f); err != nil {
		return fmt.Errorf("reading Fleet %s: %w", hubv1alpha1.FleetName, err)
	}
	members := &hubv1alpha1.MemberClusterList{}
	if err := c.List(ctx, members); err != nil {
		return fmt.Errorf("listing MemberClusters: %w", err)
	}
	now := time.Now()
	printFleet(out, f, members.Items, now)
	return fleet.Gate(f, now, maxAge)
}

// printFleet writes the Fleet's summary and one line per member.
func printFleet(out io.Writer, f *hubv1alpha1.Fleet, members []hubv1alpha1.MemberCluster, now time.Time) {
	heartbeat := "never"
	if f.Status.HeartbeatTime != nil {
		heartbeat = now.Sub(f.Status.HeartbeatTime.Time).Round(time.Second).String() + " ago"
	}
	status, reason, message := condition(f.Status.Conditions, hubv1alpha1.ReadyCondition)
	fmt.Fprintf(out, "Fleet %s: Ready=%s %s, heartbeat %s\n  %s\n\n", f.Name, status, reason, heartbeat, message)

	slices.SortFunc(members, func(a, b hubv1alpha1.MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tREADY\tREASON\tCREDENTIALS\tBUNDLES\tFAILED\tFAILING")
	for _, mc := range members {
		ready, reason, _ := condition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
		_, credentials, _ := condition(mc.Status.Conditions, hubv1alpha1.CredentialsValidCondition)
		var failing []string
		for _, b := range mc.Status.FailedBundles {
			failing = append(failing, b.Namespace+"/"+b.Name+" ("+b.Reason+")")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", mc.Name, ready, reason, credentials,
			mc.Status.Bundles.Total, mc.Status.Bundles.Failed, strings.Join(failing, ", "))
	}
	_ = w.Flush()
}

// condition returns the status, reason and message of a condition, or "Unknown".
func condition(conditions []metav1.Condition, t string) (status, reason, message string) {
	c := meta.FindStatusCondition(conditions, t)
	if c == nil {
		return "Unknown", "-", "no " + t + " condition yet"
	}
	return string(c.Status), c.Reason, c.Message
}

// newStatusCommand returns `hub status`: the health check to gate a rollout on.
func newStatusCommand() *cobra.Command {
	var (
		flags   clusterFlags
		maxAge  time.Duration
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the fleet's health; exit 0 only if it is Ready and fresh (gate a rollout on it)",
		Long: `Prints the Fleet "default" and its members, and exits 0 only if the Fleet is Ready and a hub
confirmed it (status.heartbeatTime) at most --max-age ago; otherwise it says why and exits 1. A
Ready condition alone proves nothing once the hub has stopped: the heartbeat does.

  hub status --hub-context hub --max-age 30s && ./rollout.sh`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(flags.hubKubeconfig, flags.hubContext)
			if err != nil {
				return failed(fmt.Errorf("hub kubeconfig: %w", err))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := fleetStatus(ctx, cfg, maxAge, cmd.OutOrStdout()); err != nil {
				return failed(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "\nHealthy: the Fleet is Ready and a hub confirmed it within", maxAge)
			return nil
		},
	}
	flags.bindHub(cmd.Flags())
	cmd.Flags().DurationVar(&maxAge, "max-age", defaultMaxAge, "The oldest heartbeat (Fleet status.heartbeatTime) accepted as fresh; at least two of the hub's --heartbeat-interval.")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "How long reading the hub may take.")
	return cmd
}
