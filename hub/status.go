package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleet"
	"configbundle.dev/hub/pkg/hubmanager"
)

// defaultMaxAge is the default of `hub status --max-age`: three heartbeats.
const defaultMaxAge = 30 * time.Second

// hubState is what hub status reads from the hub cluster.
type hubState struct {
	fleet   *hubv1alpha1.Fleet
	members []hubv1alpha1.MemberCluster
	bundles []hubv1alpha1.FleetBundle
	// pausedIn are the FleetBundles that select paused members (readPausedIn).
	pausedIn []pausedIn
	// membersHidden: the reader may not list MemberClusters (a tenant); members is empty.
	membersHidden bool
}

// readHub reads the Fleet, the MemberClusters and the FleetBundles of all namespaces (a tenant:
// the chosen ones, readMembers, readFleetBundles). A cluster without the hub's CRDs is said to be
// one (hubmanager.ErrNoHubCRDs), not "no matches for kind".
func readHub(ctx context.Context, cfg *rest.Config, chosen []types.NamespacedName) (*hubState, error) {
	scheme, err := hubmanager.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building a client for the hub: %w", err)
	}
	if err := hubmanager.CheckCRDs(c.RESTMapper()); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Host, err)
	}
	st := &hubState{fleet: &hubv1alpha1.Fleet{}}
	if err := c.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, st.fleet); err != nil {
		return nil, fmt.Errorf("reading Fleet %s: %w", hubv1alpha1.FleetName, err)
	}
	if st.members, st.membersHidden, err = readMembers(ctx, c); err != nil {
		return nil, err
	}
	if st.bundles, err = readFleetBundles(ctx, c, chosen); err != nil {
		return nil, err
	}
	if st.pausedIn, err = readPausedIn(ctx, c, st); err != nil {
		return nil, err
	}
	return st, nil
}

// gate returns nil if the state passes the gate, else why not (wrapping fleet.ErrNotHealthy):
// with chosen FleetBundles, on those alone (fleet.GateFleetBundles); without, on the Fleet
// (fleet.Gate) and on every FleetBundle read, which the Fleet may not have summed up yet.
func (st *hubState) gate(chosen []types.NamespacedName, now time.Time, maxAge time.Duration) error {
	if len(chosen) > 0 {
		return fleet.GateFleetBundles(st.fleet, chosen, st.bundles, now, maxAge)
	}
	if err := fleet.Gate(st.fleet, now, maxAge); err != nil {
		return err
	}
	if failing := fleet.FailingFleetBundles(st.bundles); len(failing) > 0 {
		return fmt.Errorf("%w: FleetBundle %s/%s has failed (%s)", fleet.ErrNotHealthy, failing[0].Namespace, failing[0].Name, fleet.FleetBundleFailed(&failing[0]))
	}
	return nil
}

// checkMaxAge returns a usage error if maxAge is shorter than the Fleet f allows (fleet.MinMaxAge;
// f nil: not read yet).
func checkMaxAge(maxAge time.Duration, f *hubv1alpha1.Fleet) error {
	least := fleet.MinMaxAge(f)
	if maxAge >= least {
		return nil
	}
	interval := "the hub's --heartbeat-interval (1s at the least)"
	if f != nil && f.Status.HeartbeatIntervalSeconds > 0 {
		interval = fmt.Sprintf("the hub's --heartbeat-interval (%s, Fleet status.heartbeatIntervalSeconds)", least/2)
	}
	return fmt.Errorf("--max-age %s is less than twice %s: a heartbeat is up to one interval old on a healthy fleet, so the gate would pass and fail by turns; use --max-age %s or more",
		maxAge, interval, least)
}

// printStatus writes the Fleet's summary, one line per member and the FleetBundles: the chosen
// ones, or else the failing ones.
func printStatus(out io.Writer, st *hubState, chosen []types.NamespacedName, now time.Time) {
	f := st.fleet
	heartbeat := "never"
	if f.Status.HeartbeatTime != nil {
		heartbeat = now.Sub(f.Status.HeartbeatTime.Time).Round(time.Second).String() + " ago"
	}
	status, reason, message := condition(f.Status.Conditions, hubv1alpha1.ReadyCondition)
	fmt.Fprintf(out, "Fleet %s: Ready=%s %s, heartbeat %s\n  %s\n\n", f.Name, status, reason, heartbeat, message)

	slices.SortFunc(st.members, func(a, b hubv1alpha1.MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tREADY\tREASON\tCREDENTIALS\tBUNDLES\tFAILED\tDRIFTED\tFAILING")
	for _, mc := range st.members {
		ready, reason, _ := condition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
		_, credentials, _ := condition(mc.Status.Conditions, hubv1alpha1.CredentialsValidCondition)
		var failing []string
		for _, b := range mc.Status.FailedBundles {
			failing = append(failing, b.Namespace+"/"+b.Name+" ("+b.Reason+")")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", mc.Name, ready, reason, credentials,
			mc.Status.Bundles.Total, mc.Status.Bundles.Failed, mc.Status.Bundles.Drifted, strings.Join(failing, ", "))
	}
	_ = w.Flush()
	if drifted := driftedBundles(st.members); len(drifted) > 0 {
		fmt.Fprintf(out, "\nDrifted (driftPolicy Report: the hub leaves their ConfigMaps as they are; kubectl describe configbundle says what differs): %s\n", strings.Join(drifted, ", "))
	}
	printHidden(out, st)
	printPaused(out, st, chosen)
	if n := f.Status.Clusters.Unowned; n > 0 {
		fmt.Fprintf(out, "\nUnowned: %d of %d members are managed by no live hub replica (their status.replica is not live): neither reconciled nor reported; kubectl get mc -o wide shows their REPLICA\n",
			n, f.Status.Clusters.Total)
	}
	printFleetBundles(out, st.bundles, chosen)
}

// driftedBundles names the drifted bundles each member lists among its failed ones
// (status.failedBundles, reason Drifted), as MEMBER:NAMESPACE/NAME, in the order of members; a
// member with more drifted bundles than it lists says how many more.
func driftedBundles(members []hubv1alpha1.MemberCluster) []string {
	var names []string
	for _, mc := range members {
		listed := 0
		for _, b := range mc.Status.FailedBundles {
			if b.Reason == configbundlev1alpha1.DriftedReason {
				names = append(names, mc.Name+":"+b.Namespace+"/"+b.Name)
				listed++
			}
		}
		if more := mc.Status.Bundles.Drifted - int64(listed); more > 0 {
			names = append(names, fmt.Sprintf("and %d more in %s", more, mc.Name))
		}
	}
	return names
}

// pausedMembers names the members paused for maintenance (spec.paused), in the order of members.
func pausedMembers(members []hubv1alpha1.MemberCluster) []string {
	var names []string
	for _, mc := range members {
		if mc.Spec.Paused {
			names = append(names, mc.Name)
		}
	}
	return names
}

// printFleetBundles writes the FleetBundles' counts and a line per chosen FleetBundle, or,
// without chosen ones, per failing one.
func printFleetBundles(out io.Writer, bundles []hubv1alpha1.FleetBundle, chosen []types.NamespacedName) {
	counts := fleet.CountFleetBundles(bundles)
	fmt.Fprintf(out, "\nFleetBundles: %d, %d Ready, %d failed\n", counts.Total, counts.Ready, counts.Failed)
	rows := fleet.FailingFleetBundles(bundles)
	var absent []types.NamespacedName
	if len(chosen) > 0 {
		rows, absent = chosenFleetBundles(bundles, chosen)
	}
	if len(rows) == 0 && len(absent) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE/NAME\tREADY\tREASON\tSELECTED\tREADY\tFAILED\tFAILING")
	for _, fb := range rows {
		ready, reason, message := condition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
		c := fb.Status.Clusters
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%d\t%d\t%d\t%s\n", fb.Namespace, fb.Name, ready, reason, c.Selected, c.Ready, c.Failed, failingClusters(&fb, message))
	}
	for _, key := range absent {
		fmt.Fprintf(w, "%s\t-\tNotFound\t-\t-\t-\tno such FleetBundle\n", key)
	}
	_ = w.Flush()
}

// chosenFleetBundles returns the chosen FleetBundles among bundles, in the order chosen, and the
// chosen ones that are absent.
func chosenFleetBundles(bundles []hubv1alpha1.FleetBundle, chosen []types.NamespacedName) (found []hubv1alpha1.FleetBundle, absent []types.NamespacedName) {
	for _, key := range chosen {
		i := slices.IndexFunc(bundles, func(fb hubv1alpha1.FleetBundle) bool { return fb.Namespace == key.Namespace && fb.Name == key.Name })
		if i < 0 {
			absent = append(absent, key)
			continue
		}
		found = append(found, bundles[i])
	}
	return found, absent
}

// failingClusters names the first hubv1alpha1.MaxNamedMembers failed members of a FleetBundle
// with their reasons, and says how many more there are; without any, it is the Ready message
// (why an InvalidSelector or a NameTooLong places nothing).
func failingClusters(fb *hubv1alpha1.FleetBundle, message string) string {
	if len(fb.Status.FailedClusters) == 0 {
		if fleet.FleetBundleFailed(fb) != "" {
			return message
		}
		return ""
	}
	var names []string
	for _, fc := range fb.Status.FailedClusters[:min(len(fb.Status.FailedClusters), hubv1alpha1.MaxNamedMembers)] {
		names = append(names, fc.Cluster+" ("+fc.Reason+")")
	}
	if more := int(fb.Status.Clusters.Failed) - len(names); more > 0 {
		names = append(names, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(names, ", ")
}

// condition returns the status, reason and message of a condition, or "Unknown".
func condition(conditions []metav1.Condition, t string) (status, reason, message string) {
	c := meta.FindStatusCondition(conditions, t)
	if c == nil {
		return "Unknown", "-", "no " + t + " condition yet"
	}
	return string(c.Status), c.Reason, c.Message
}

// fleetBundleKeys is the value of --fleet-bundle: NAMESPACE/NAME, repeatable.
type fleetBundleKeys []types.NamespacedName

func (k *fleetBundleKeys) Type() string { return "NAMESPACE/NAME" }

func (k *fleetBundleKeys) String() string {
	s := make([]string, len(*k))
	for i, key := range *k {
		s[i] = key.String()
	}
	return strings.Join(s, ",")
}

// Set adds one NAMESPACE/NAME (once, if given twice); anything else is an error, which the
// command line reports as a usage error.
func (k *fleetBundleKeys) Set(value string) error {
	key, err := parseFleetBundleKey(value)
	if err != nil {
		return err
	}
	if !slices.Contains(*k, key) {
		*k = append(*k, key)
	}
	return nil
}

// parseFleetBundleKey parses NAMESPACE/NAME: a namespace name (a DNS-1123 label) and an object
// name (a DNS-1123 subdomain).
func parseFleetBundleKey(value string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(value, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, errors.New("want NAMESPACE/NAME")
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("want NAMESPACE/NAME, and namespace %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("want NAMESPACE/NAME, and %q is not a FleetBundle name: %s", name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// passed ends a hub status that passed its gate: a failure with --fail-on-paused (onPaused)
// while a member in question is paused, else the closing line.
func passed(out io.Writer, st *hubState, chosen fleetBundleKeys, maxAge time.Duration, onPaused bool) error {
	if err := failOnPaused(st, chosen); onPaused && err != nil {
		return failed(err)
	}
	if len(chosen) > 0 {
		fmt.Fprintf(out, "\nHealthy: every FleetBundle named (%s) is Ready, and a hub confirmed it within %s%s\n", strings.ReplaceAll(chosen.String(), ",", ", "), maxAge, pausedSummary(st, chosen))
		return nil
	}
	fmt.Fprintf(out, "\nHealthy: the Fleet is Ready and a hub confirmed it within %s%s\n", maxAge, pausedSummary(st, chosen))
	return nil
}

// newStatusCommand returns `hub status`: the health check to gate a rollout on.
func newStatusCommand() *cobra.Command {
	var (
		flags    clusterFlags
		maxAge   time.Duration
		timeout  time.Duration
		chosen   fleetBundleKeys
		onPaused bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the fleet's health; exit 0 only if it is Ready and fresh (gate a rollout on it)",
		Long: `Prints the Fleet "default", its members and its failing FleetBundles, and exits 0 only if the
Fleet is Ready (every member Ready, no ConfigBundle failed or drifted, no FleetBundle failed) and a hub
confirmed it (status.heartbeatTime) at most --max-age ago; otherwise it says why and exits 1. A
Ready condition alone proves nothing once the hub has stopped: the heartbeat does.

With --fleet-bundle it gates on the FleetBundles named alone: it exits 0 only if each exists and
is Ready for its current generation and the heartbeat is fresh, whatever the rest of the fleet.

Paused members (hub pause) are named, with the FleetBundles they hold back: those selecting
them whose members hold revisions older than the current one (status.heldRevisions). A paused
member fails no gate unless --fail-on-paused is given.

--max-age must be at least twice the hub's --heartbeat-interval, which the Fleet publishes
(status.heartbeatIntervalSeconds): a shorter one is a usage error (exit 2).

  hub status --hub-context hub --max-age 30s && ./rollout.sh
  hub status --hub-context hub --fleet-bundle web/frontend --fleet-bundle web/api`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkMaxAge(maxAge, nil); err != nil {
				return err // a usage error, said before anything is read
			}
			cfg, err := loadConfig(flags.hubKubeconfig, flags.hubContext)
			if err != nil {
				return failed(fmt.Errorf("hub kubeconfig: %w", err))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, err := readHub(ctx, cfg, chosen)
			if err != nil {
				return failed(err)
			}
			if err := checkMaxAge(maxAge, st.fleet); err != nil {
				return err // a usage error for the hub that runs
			}
			now, out := time.Now(), cmd.OutOrStdout()
			printStatus(out, st, chosen, now)
			if err := st.gate(chosen, now, maxAge); err != nil {
				return failed(err)
			}
			return passed(out, st, chosen, maxAge, onPaused)
		},
	}
	flags.bindHub(cmd.Flags())
	cmd.Flags().DurationVar(&maxAge, "max-age", defaultMaxAge, "The oldest heartbeat (Fleet status.heartbeatTime) accepted as fresh; at least twice the hub's --heartbeat-interval (Fleet status.heartbeatIntervalSeconds).")
	cmd.Flags().Var(&chosen, "fleet-bundle", "Gate on this FleetBundle alone, NAMESPACE/NAME (repeatable): exit 0 only if each one named exists and is Ready for its current generation, and the heartbeat is fresh.")
	cmd.Flags().BoolVar(&onPaused, "fail-on-paused", false, "Exit 1 if a member is paused for maintenance (with --fleet-bundle: one those FleetBundles select): a gate that must see the whole fleet current.")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "How long reading the hub may take.")
	return cmd
}
