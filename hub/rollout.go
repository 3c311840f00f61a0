package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
)

// maxHistoryMessage is the most characters of a template's message `hub rollout history` shows.
const maxHistoryMessage = 40

// fleetBundleResource names a FleetBundle in what the rollout commands print, as kubectl does:
// "fleetbundle.hub.configbundle.dev/NAME".
var fleetBundleResource = "fleetbundle." + hubv1alpha1.GroupVersion.Group

// rolloutFlags are the flags every rollout subcommand takes: where the hub is, and the
// FleetBundle's namespace.
type rolloutFlags struct {
	clusterFlags
	namespace string
}

func (f *rolloutFlags) bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	f.bindHub(fs)
	fs.StringVarP(&f.namespace, "namespace", "n", metav1.NamespaceDefault, "Namespace of the FleetBundle on the hub.")
}

// key returns the FleetBundle name names in --namespace; a name or namespace that cannot be one
// is a usage error.
func (f *rolloutFlags) key(name string) (types.NamespacedName, error) {
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--namespace %q is not a namespace name: %s", f.namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("%q is not a FleetBundle name: %s", name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: f.namespace, Name: name}, nil
}

// client returns a client of the hub cluster, failing (exit 1) when the kubeconfig does not load
// or the cluster serves no hub API.
func (f *rolloutFlags) client() (client.WithWatch, error) {
	cfg, err := loadConfig(f.hubKubeconfig, f.hubContext)
	if err != nil {
		return nil, failed(fmt.Errorf("hub kubeconfig: %w", err))
	}
	scheme, err := hubmanager.Scheme() // client-go's scheme, apps/v1 ControllerRevision included
	if err != nil {
		return nil, failed(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, failed(fmt.Errorf("building a client for the hub: %w", err))
	}
	if err := hubmanager.CheckCRDs(c.RESTMapper()); err != nil {
		return nil, failed(fmt.Errorf("%s: %w", cfg.Host, err))
	}
	return c, nil
}

// exactlyOneFleetBundle accepts exactly one positional argument, the FleetBundle's NAME.
func exactlyOneFleetBundle(_ *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return errors.New("the FleetBundle's NAME is missing")
	default:
		return fmt.Errorf("want one NAME, got %d arguments: %s", len(args), strings.Join(args, " "))
	}
}

// newRolloutCommand returns `hub rollout`, the kubectl rollout of FleetBundles.
func newRolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow, list, undo, pause, resume or approve the staged rollout of a FleetBundle",
		Long: `Manages the rollout of a FleetBundle's template, as kubectl rollout does a Deployment's: every
distinct template is a revision, kept as a ControllerRevision NAME-<revision> in the FleetBundle's
namespace; status.updateRevision is the spec's, status.currentRevision the last one rolled out.`,
		Example: `  hub rollout status web -n apps --timeout 10m && echo rolled out
  hub rollout history web -n apps
  hub rollout undo web -n apps --to-revision 2
  hub rollout pause web -n apps
  hub rollout approve web -n apps --stage prod`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("want a subcommand: status, history, undo, pause, resume or approve")
		},
	}
	cmd.AddCommand(newRolloutStatusCommand(), newRolloutHistoryCommand(), newRolloutUndoCommand(),
		newRolloutPauseCommand(true), newRolloutPauseCommand(false), newRolloutApproveCommand())
	return cmd
}

func newRolloutStatusCommand() *cobra.Command {
	var (
		f       rolloutFlags
		follow  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status NAME [flags]",
		Short: "Follow a FleetBundle's rollout; exit 0 once it is complete, 1 if it halted, rolled back or timed out",
		Long: `Prints where the rollout of the FleetBundle NAME stands (updateRevision, currentRevision, stage,
phase, and how many selected members are updated, ready and failed), a line each time that
changes, until the rollout is complete (exit 0) or stops: Halted or RolledBack (exit 1, with the
rollout's message and the failed members), or --timeout passes (exit 1).

A rollout is complete once the hub has observed the FleetBundle's generation and its phase is
Complete; for a FleetBundle without spec.rollout, once currentRevision equals updateRevision and
it is Ready. A paused rollout is waited for, like a progressing one, and so is a rollout held at a
stage whose members are all paused (MemberCluster spec.paused): its lines name the paused members
it waits for, until they are resumed or spec.rollout.skipPausedStages is set.

With --watch=false it prints once and exits 0 if the rollout is complete, 1 otherwise.`,
		Example: `  hub rollout status web -n apps
  hub rollout status web -n apps --timeout 15m
  hub rollout status web -n apps --watch=false`,
		Args: exactlyOneFleetBundle,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := f.key(args[0])
			if err != nil {
				return err
			}
			if timeout < 0 {
				return fmt.Errorf("--timeout %s is negative; 0 means no limit", timeout)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return rolloutStatus(ctx, c, key, follow, timeout, cmd.OutOrStdout())
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&follow, "watch", "w", true, "Follow the rollout until it completes or stops; with --watch=false print once.")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "How long to wait for the rollout to complete before exiting 1; 0 waits for ever.")
	return cmd
}

// rolloutStatus prints the rollout of the FleetBundle key, then, with follow, a line each time it
// changes, until it is complete (nil) or stopped or ctx ends (a failure).
func rolloutStatus(ctx context.Context, c client.WithWatch, key types.NamespacedName, follow bool, timeout time.Duration, out io.Writer) error {
	fb := &hubv1alpha1.FleetBundle{}
	if err := c.Get(ctx, key, fb); err != nil {
		return failed(fleetBundleError(key, err))
	}
	last := rolloutLine(fb)
	fmt.Fprintln(out, last)
	if o := outcomeOf(fb); o != rolloutWaiting || !follow {
		return reportOutcome(out, fb, o)
	}

	// Follow it through an informer: a list, then a watch that is resumed, or listed again, when
	// the connection drops or its resourceVersion has expired.
	byName := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			list := &hubv1alpha1.FleetBundleList{}
			return list, c.List(ctx, list, client.InNamespace(key.Namespace), &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return c.Watch(ctx, &hubv1alpha1.FleetBundleList{}, client.InNamespace(key.Namespace), &client.ListOptions{Raw: &opts})
		},
	}
	exists := func(store cache.Store) (bool, error) {
		if _, ok, err := store.GetByKey(key.String()); err != nil || !ok {
			return false, errors.Join(err, fmt.Errorf("FleetBundle %s was deleted", key))
		}
		return false, nil
	}
	var outcome rolloutOutcome
	_, err := watchtools.UntilWithSync(ctx, lw, &hubv1alpha1.FleetBundle{}, exists, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			return false, fmt.Errorf("FleetBundle %s was deleted", key)
		case watch.Added, watch.Modified:
		default:
			return false, nil
		}
		fb = ev.Object.(*hubv1alpha1.FleetBundle)
		if line := rolloutLine(fb); line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		outcome = outcomeOf(fb)
		return outcome != rolloutWaiting, nil
	})
	switch {
	case err == nil:
		return reportOutcome(out, fb, outcome)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failed(fmt.Errorf("FleetBundle %s: timed out after %s waiting for the rollout of revision %d to complete (%s)",
			key, timeout, fb.Status.UpdateRevision, standing(fb)))
	default:
		return failed(err)
	}
}

// rolloutOutcome is where a rollout stands for `hub rollout status`.
type rolloutOutcome int

const (
	rolloutWaiting  rolloutOutcome = iota // progressing, soaking, paused, or not observed yet
	rolloutComplete                       // done: exit 0
	rolloutStopped                        // Halted or RolledBack: exit 1
)

// outcomeOf says whether the rollout of fb is complete, stopped or still to wait for. A status
// of an older generation is waited for, whatever it says.
func outcomeOf(fb *hubv1alpha1.FleetBundle) rolloutOutcome {
	st := &fb.Status
	if st.ObservedGeneration != fb.Generation {
		return rolloutWaiting
	}
	if fb.Spec.Rollout == nil {
		ready := meta.FindStatusCondition(st.Conditions, hubv1alpha1.ReadyCondition)
		if st.UpdateRevision != 0 && st.CurrentRevision == st.UpdateRevision && ready != nil &&
			ready.Status == metav1.ConditionTrue && (ready.ObservedGeneration == 0 || ready.ObservedGeneration == fb.Generation) {
			return rolloutComplete
		}
		return rolloutWaiting
	}
	if st.Rollout == nil {
		return rolloutWaiting
	}
	switch st.Rollout.Phase {
	case hubv1alpha1.RolloutComplete:
		return rolloutComplete
	case hubv1alpha1.RolloutHalted, hubv1alpha1.RolloutRolledBack:
		return rolloutStopped
	}
	return rolloutWaiting
}

// phaseOf names where the rollout of fb stands: its phase, or, without spec.rollout, its Ready
// condition.
func phaseOf(fb *hubv1alpha1.FleetBundle) string {
	if fb.Spec.Rollout == nil {
		status, reason, _ := condition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
		return fmt.Sprintf("no spec.rollout, Ready=%s %s", status, reason)
	}
	if r := fb.Status.Rollout; r != nil && r.Phase != "" {
		return "phase " + string(r.Phase)
	}
	return "phase -"
}

// cmpOrDash is s, or "-" if it is empty.
func cmpOrDash(s string) string { return cmp.Or(s, "-") }

// rolloutLine is the line `hub rollout status` prints for fb, and prints again when it changes:
// the revisions, the stage and phase, the counts and what the rollout waits for.
func rolloutLine(fb *hubv1alpha1.FleetBundle) string {
	st := &fb.Status
	var b strings.Builder
	fmt.Fprintf(&b, "updateRevision %d, currentRevision %d, ", st.UpdateRevision, st.CurrentRevision)
	message := ""
	if fb.Spec.Rollout == nil {
		_, _, message = condition(st.Conditions, hubv1alpha1.ReadyCondition)
	} else {
		stage := "-"
		if st.Rollout != nil {
			stage = cmpOrDash(st.Rollout.Stage)
			message = st.Rollout.Message
		}
		fmt.Fprintf(&b, "stage %s, ", stage)
	}
	c := st.Clusters
	fmt.Fprintf(&b, "%s: %d selected, %d updated, %d ready, %d failed", phaseOf(fb), c.Selected, c.Updated, c.Ready, c.Failed)
	switch {
	case st.ObservedGeneration != fb.Generation:
		fmt.Fprintf(&b, "; waiting for the hub to observe generation %d (the status is of generation %d)", fb.Generation, st.ObservedGeneration)
	case message != "":
		b.WriteString("; " + message)
	}
	writeConsumers(&b, fb)
	return b.String()
}

// writeConsumers adds to a rollout's line, with spec.rollout.workloads Observe or Restart, one
// line per member of the current stage that holds updateRevision: the consumers of its bundle
// and where each stands.
func writeConsumers(b *strings.Builder, fb *hubv1alpha1.FleetBundle) {
	if fb.Status.Rollout == nil {
		return
	}
	for _, m := range fb.Status.Rollout.Workloads {
		fmt.Fprintf(b, "\n  member %s:", m.Cluster)
		if len(m.Consumers) == 0 {
			b.WriteString(" no consumers")
		}
		for i, c := range m.Consumers {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(b, " %s %s %s", c.Kind, c.Name, c.State)
			if c.Message != "" {
				fmt.Fprintf(b, " (%s)", c.Message)
			}
		}
	}
}

// reportOutcome says how the rollout of fb ended: nil once complete, else a failure, after
// printing, for a stopped rollout, its message and the failed members.
func reportOutcome(out io.Writer, fb *hubv1alpha1.FleetBundle, o rolloutOutcome) error {
	key := client.ObjectKeyFromObject(fb)
	st := &fb.Status
	switch o {
	case rolloutComplete:
		fmt.Fprintf(out, "FleetBundle %s: revision %d successfully rolled out\n", key, st.UpdateRevision)
		return nil
	case rolloutStopped:
		what := "halted"
		if st.Rollout.Phase == hubv1alpha1.RolloutRolledBack {
			what = fmt.Sprintf("rolled back (members hold revision %d again)", st.CurrentRevision)
		}
		fmt.Fprintf(out, "The rollout of revision %d %s: %s\n", st.UpdateRevision, what, cmpOrDash(st.Rollout.Message))
		printFailedClusters(out, fb)
		return failed(fmt.Errorf("FleetBundle %s: the rollout of revision %d is %s", key, st.UpdateRevision, st.Rollout.Phase))
	}
	return failed(fmt.Errorf("FleetBundle %s: the rollout of revision %d is not complete (%s)", key, st.UpdateRevision, standing(fb)))
}

// standing says, for a rollout not complete, where it stands: its phase and what it waits for
// (such as paused members), or that the hub has not observed the FleetBundle's generation yet.
func standing(fb *hubv1alpha1.FleetBundle) string {
	if fb.Status.ObservedGeneration != fb.Generation {
		return fmt.Sprintf("the hub has not observed generation %d yet", fb.Generation)
	}
	if ro := fb.Status.Rollout; fb.Spec.Rollout != nil && ro != nil && ro.Message != "" {
		return phaseOf(fb) + ": " + ro.Message
	}
	return phaseOf(fb)
}

// printFailedClusters lists the failed members of fb's status.failedClusters, and how many more
// there are.
func printFailedClusters(out io.Writer, fb *hubv1alpha1.FleetBundle) {
	failedClusters := fb.Status.FailedClusters
	if len(failedClusters) == 0 {
		return
	}
	fmt.Fprintln(out, "Failed members:")
	for _, fc := range failedClusters {
		line := "  " + fc.Cluster + ": " + fc.Reason
		if fc.Message != "" {
			line += ": " + fc.Message
		}
		fmt.Fprintln(out, line)
	}
	if more := int(fb.Status.Clusters.Failed) - len(failedClusters); more > 0 {
		fmt.Fprintf(out, "  and %d more\n", more)
	}
}

func newRolloutHistoryCommand() *cobra.Command {
	var (
		f        rolloutFlags
		revision int64
	)
	cmd := &cobra.Command{
		Use:   "history NAME [flags]",
		Short: "List the revisions of a FleetBundle that are kept, or print one's definition",
		Long: `Lists the revisions of the FleetBundle NAME that the hub keeps (the ControllerRevisions
NAME-<revision> in its namespace), oldest first: each one's age, its template's message
(shortened), and whether it is the currentRevision, the updateRevision or the failedRevision of a
rollout rolled back; then, if any, the approvals of spec.rollout.approvals: who approved which stage
of which revision. With --revision it prints that revision's definition as YAML (the template's
metadata and spec, and its templateEngine and overrides when set), or exits 1 if it is not kept.`,
		Example: `  hub rollout history web -n apps
  hub rollout history web -n apps --revision 2 > template.yaml`,
		Args: exactlyOneFleetBundle,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := f.key(args[0])
			if err != nil {
				return err
			}
			if revision < 0 {
				return fmt.Errorf("--revision %d is negative", revision)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), defaultTimeout)
			defer cancel()
			fb, revs, err := readRevisions(ctx, c, key)
			if err != nil {
				return failed(err)
			}
			out := cmd.OutOrStdout()
			if revision == 0 {
				printHistory(out, fb, revs, time.Now())
				return nil
			}
			i := slices.IndexFunc(revs, func(r fleetBundleRevision) bool { return r.number == revision })
			if i < 0 {
				return failed(fmt.Errorf("FleetBundle %s has no revision %d (%s)", key, revision, keptRevisions(revs)))
			}
			doc, err := yaml.JSONToYAML(revs[i].data)
			if err != nil {
				return failed(fmt.Errorf("revision %d of FleetBundle %s: %w", revision, key, err))
			}
			_, err = out.Write(doc)
			return err
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().Int64Var(&revision, "revision", 0, "Print the definition of this revision as YAML.")
	return cmd
}

// fleetBundleRevision is one revision of a FleetBundle, read from its ControllerRevision.
type fleetBundleRevision struct {
	number   int64
	created  time.Time
	data     []byte               // the definition as JSON
	template *template.Definition // nil if data does not decode
	err      error                // why data does not decode
}

// readRevisions reads the FleetBundle key and its revisions, sorted by number: the
// ControllerRevisions in its namespace labelled with it, but for those another FleetBundle of the
// same name, since deleted, controls.
func readRevisions(ctx context.Context, c client.Client, key types.NamespacedName) (*hubv1alpha1.FleetBundle, []fleetBundleRevision, error) {
	fb := &hubv1alpha1.FleetBundle{}
	if err := c.Get(ctx, key, fb); err != nil {
		return nil, nil, fleetBundleError(key, err)
	}
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{hubv1alpha1.FleetBundleLabel: fleetbundle.LabelValue(key)}); err != nil {
		return nil, nil, fmt.Errorf("listing the revisions of FleetBundle %s: %w", key, err)
	}
	var revs []fleetBundleRevision
	for i := range list.Items {
		cr := &list.Items[i]
		if owner := metav1.GetControllerOf(cr); owner != nil && owner.UID != fb.UID {
			continue
		}
		rev := fleetBundleRevision{number: cr.Revision, created: cr.CreationTimestamp.Time, data: cr.Data.Raw}
		if r, err := rollout.RevisionOf(cr); err != nil {
			rev.err = fmt.Errorf("ControllerRevision %s holds no definition: %w", cr.Name, err)
		} else {
			rev.template = &r.Definition
		}
		revs = append(revs, rev)
	}
	slices.SortFunc(revs, func(a, b fleetBundleRevision) int { return cmp.Compare(a.number, b.number) })
	return fb, revs, nil
}

// fleetBundleError says that the FleetBundle key does not exist, or why reading it failed.
func fleetBundleError(key types.NamespacedName, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no FleetBundle %s in namespace %s", key.Name, key.Namespace)
	}
	return fmt.Errorf("reading FleetBundle %s: %w", key, err)
}

// keptRevisions names the revisions kept, for an error.
func keptRevisions(revs []fleetBundleRevision) string {
	if len(revs) == 0 {
		return "no revision is kept"
	}
	numbers := make([]string, len(revs))
	for i, r := range revs {
		numbers[i] = strconv.FormatInt(r.number, 10)
	}
	return "kept: " + strings.Join(numbers, ", ")
}

// printHistory writes the table of `hub rollout history`.
func printHistory(out io.Writer, fb *hubv1alpha1.FleetBundle, revs []fleetBundleRevision, now time.Time) {
	fmt.Fprintf(out, "%s/%s\n", fleetBundleResource, fb.Name)
	defer printApprovals(out, fb)
	if len(revs) == 0 {
		fmt.Fprintln(out, "No revisions kept yet: the hub records one for each distinct template.")
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "REVISION\tSTATUS\tAGE\tMESSAGE")
	for _, r := range revs {
		message := "(" + fmt.Sprint(r.err) + ")"
		if r.template != nil {
			message = shortMessage(r.template.Spec.Message, maxHistoryMessage)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", r.number, revisionStatus(&fb.Status, r.number), duration.HumanDuration(now.Sub(r.created)), message)
	}
	_ = w.Flush()
}

// printApprovals writes, after the history, who approved which stage of which revision, if
// anyone did.
func printApprovals(out io.Writer, fb *hubv1alpha1.FleetBundle) {
	if fb.Spec.Rollout == nil || len(fb.Spec.Rollout.Approvals) == 0 {
		return
	}
	approvals := slices.Clone(fb.Spec.Rollout.Approvals)
	slices.SortFunc(approvals, func(a, b hubv1alpha1.RolloutApproval) int {
		return cmp.Or(cmp.Compare(a.Revision, b.Revision), strings.Compare(a.Stage, b.Stage))
	})
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "REVISION\tSTAGE\tAPPROVED BY")
	for _, a := range approvals {
		fmt.Fprintf(w, "%d\t%s\t%s\n", a.Revision, a.Stage, a.ApprovedBy)
	}
	_ = w.Flush()
}

// revisionStatus says what revision n is to a FleetBundle of status st: current, update and
// failed, as many as apply, or "-".
func revisionStatus(st *hubv1alpha1.FleetBundleStatus, n int64) string {
	var is []string
	if n == st.CurrentRevision {
		is = append(is, "current")
	}
	if n == st.UpdateRevision {
		is = append(is, "update")
	}
	if st.Rollout != nil && n == st.Rollout.FailedRevision {
		is = append(is, "failed")
	}
	if len(is) == 0 {
		return "-"
	}
	return strings.Join(is, ",")
}

// shortMessage quotes a message for one table cell: at most max characters of it, and "..."
// after the quotes when it is longer.
func shortMessage(message string, maxChars int) string {
	if utf8.RuneCountInString(message) <= maxChars {
		return strconv.Quote(message)
	}
	runes := []rune(message)
	return strconv.Quote(string(runes[:maxChars])) + "..."
}

func newRolloutUndoCommand() *cobra.Command {
	var (
		f          rolloutFlags
		toRevision int64
	)
	cmd := &cobra.Command{
		Use:   "undo NAME [flags]",
		Short: "Write an earlier revision's definition into a FleetBundle's spec",
		Long: `Writes the definition of a kept revision (spec.template, spec.templateEngine, spec.overrides and
spec.dataFrom) into the spec of the FleetBundle NAME, as kubectl rollout undo does a Deployment's template: by default the highest revision kept below status.updateRevision,
else --to-revision. The hub then rolls it out as any change of the template, through the stages of
spec.rollout. It exits 1 if the revision is not kept, or if there is none to undo to.

A revision keeps a copy of what its dataFrom sources held: the undo sets spec.dataFromRevision,
so that the hub places that copy, even if a source changed or was deleted since, until a source
changes again.

The spec is patched with the resourceVersion read, so that a change made meanwhile is not
overwritten (it is read again and the undo retried). If the FleetBundle's spec is owned by Git,
change it there too, or the next sync reverts the undo.`,
		Example: `  hub rollout undo web -n apps
  hub rollout undo web -n apps --to-revision 2`,
		Args: exactlyOneFleetBundle,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := f.key(args[0])
			if err != nil {
				return err
			}
			if toRevision < 0 {
				return fmt.Errorf("--to-revision %d is negative", toRevision)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), defaultTimeout)
			defer cancel()
			return undo(ctx, c, key, toRevision, cmd.OutOrStdout())
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "The revision to roll back to (default: the highest kept below status.updateRevision).")
	return cmd
}

// undo writes revision to (0: the one undoTarget chooses) of the FleetBundle key into its
// spec (template, templateEngine, overrides) with a JSON merge patch that carries the resourceVersion read, reading again and
// retrying on a conflict.
func undo(ctx context.Context, c client.Client, key types.NamespacedName, to int64, out io.Writer) error {
	var (
		target  int64
		skipped bool
	)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fb, revs, err := readRevisions(ctx, c, key)
		if err != nil {
			return failed(err)
		}
		if target, err = undoTarget(revs, fb.Status.UpdateRevision, to); err != nil {
			return failed(fmt.Errorf("FleetBundle %s: %w", key, err))
		}
		rev := revs[slices.IndexFunc(revs, func(r fleetBundleRevision) bool { return r.number == target })]
		if rev.template == nil {
			return failed(rev.err)
		}
		current, want, pin := template.DefinitionOf(fb), *rev.template, sourcesPin(fb, revs, target, sourcesNow(ctx, c, fb, rev.template))
		want.Sources, want.SourcesHash = nil, "" // the spec names the sources; pin says which copy of them to place
		if skipped = template.Hash(&current) == template.Hash(&want) && equality.Semantic.DeepEqual(fb.Spec.DataFromRevision, pin); skipped {
			return nil
		}
		patch := client.MergeFromWithOptions(fb.DeepCopy(), client.MergeFromWithOptimisticLock{})
		fb.Spec.Template, fb.Spec.Overrides = rev.template.ConfigBundleTemplate, rev.template.Overrides
		fb.Spec.TemplateEngine = cmp.Or(rev.template.TemplateEngine, hubv1alpha1.TemplateEngineNone)
		fb.Spec.DataFrom, fb.Spec.DataFromRevision = rev.template.DataFrom, pin
		return c.Patch(ctx, fb, patch)
	})
	switch {
	case err == nil && skipped:
		fmt.Fprintf(out, "%s/%s skipped rollback (its template is revision %d already)\n", fleetBundleResource, key.Name, target)
		return nil
	case err == nil:
		fmt.Fprintf(out, "%s/%s rolled back to revision %d\n", fleetBundleResource, key.Name, target)
		return nil
	case errors.As(err, new(*failure)):
		return err
	default:
		return failed(fmt.Errorf("writing revision %d's template into FleetBundle %s: %w", target, key, err))
	}
}

// sourcesPin is the spec.dataFromRevision an undo to revision target writes: none if the
// revision has no sources; otherwise the revision, while the sources hold what they hold now
// (now, what sourcesNow read; nil if it could not: then what status.updateRevision copied of
// them), so that a later change of a source rolls out again.
func sourcesPin(fb *hubv1alpha1.FleetBundle, revs []fleetBundleRevision, target int64, now map[string]string) *hubv1alpha1.DataFromRevision {
	i := slices.IndexFunc(revs, func(r fleetBundleRevision) bool { return r.number == target })
	if i < 0 || revs[i].template == nil || len(revs[i].template.DataFrom) == 0 {
		return nil
	}
	secret := revs[i].template.Spec.TargetKind() == configbundlev1alpha1.TargetSecret
	if j := slices.IndexFunc(revs, func(r fleetBundleRevision) bool { return r.number == fb.Status.UpdateRevision }); now == nil && j >= 0 && revs[j].template != nil {
		if secret {
			return &hubv1alpha1.DataFromRevision{Revision: target, SourcesHash: revs[j].template.SourcesHash}
		}
		now = revs[j].template.Sources
	}
	return &hubv1alpha1.DataFromRevision{Revision: target, SourcesHash: template.PinHash(secret, now)}
}

// sourcesNow reads what the sources of definition d (its dataFrom, as the FleetBundle fb will
// name them once undone) hold now, as the hub would resolve them; nil if they cannot be read or
// resolved (a missing source: the pin applies whatever its hash).
func sourcesNow(ctx context.Context, c client.Reader, fb *hubv1alpha1.FleetBundle, d *template.Definition) map[string]string {
	if len(d.DataFrom) == 0 {
		return nil
	}
	undone := fb.DeepCopy()
	undone.Spec.DataFrom, undone.Spec.Template = d.DataFrom, d.ConfigBundleTemplate
	now, err := rollout.ReadSources(ctx, c, undone)
	if err != nil {
		return nil
	}
	return now
}

// errNothingToUndo is undoTarget's error when no revision below updateRevision is kept.
var errNothingToUndo = errors.New("nothing to undo to")

// undoTarget chooses the revision to undo to among those kept (revs, sorted): to, if kept, else,
// with to 0, the highest below updateRevision.
func undoTarget(revs []fleetBundleRevision, updateRevision, to int64) (int64, error) {
	if to > 0 {
		if !slices.ContainsFunc(revs, func(r fleetBundleRevision) bool { return r.number == to }) {
			return 0, fmt.Errorf("revision %d is not kept (%s)", to, keptRevisions(revs))
		}
		return to, nil
	}
	if updateRevision == 0 {
		return 0, fmt.Errorf("%w: the hub has recorded no revision yet (status.updateRevision is 0)", errNothingToUndo)
	}
	for _, r := range slices.Backward(revs) {
		if r.number < updateRevision {
			return r.number, nil
		}
	}
	return 0, fmt.Errorf("%w: no revision below updateRevision %d is kept (%s)", errNothingToUndo, updateRevision, keptRevisions(revs))
}

// newRolloutPauseCommand returns `hub rollout pause` (pause true) or `hub rollout resume`.
func newRolloutPauseCommand(pause bool) *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "pause NAME [flags]",
		Short: "Pause a FleetBundle's rollout: no member gets a new revision until it is resumed",
		Long: `Sets spec.rollout.paused of the FleetBundle NAME: no member gets a new revision; members keep what
they hold, enforced and healed as before, until "hub rollout resume". It exits 1 for a FleetBundle
without spec.rollout, whose changes reach every member at once.`,
		Example: `  hub rollout pause web -n apps`,
	}
	if !pause {
		cmd.Use = "resume NAME [flags]"
		cmd.Short = "Resume a FleetBundle's paused rollout"
		cmd.Long = `Clears spec.rollout.paused of the FleetBundle NAME: its rollout goes on where it stood. It exits 1
for a FleetBundle without spec.rollout.`
		cmd.Example = `  hub rollout resume web -n apps`
	}
	cmd.Args = exactlyOneFleetBundle
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
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
		return setPaused(ctx, c, key, pause, cmd.OutOrStdout())
	}
	f.bind(cmd.Flags())
	return cmd
}

// setPaused sets spec.rollout.paused of the FleetBundle key with a JSON merge patch.
func setPaused(ctx context.Context, c client.Client, key types.NamespacedName, pause bool, out io.Writer) error {
	verb, done := "pause", "paused"
	if !pause {
		verb, done = "resume", "resumed"
	}
	fb := &hubv1alpha1.FleetBundle{}
	if err := c.Get(ctx, key, fb); err != nil {
		return failed(fleetBundleError(key, err))
	}
	if fb.Spec.Rollout == nil {
		return failed(fmt.Errorf("FleetBundle %s has no rollout to %s: without spec.rollout a change reaches every selected member at once", key, verb))
	}
	if fb.Spec.Rollout.Paused == pause {
		state := "paused"
		if !pause {
			state = "not paused"
		}
		fmt.Fprintf(out, "%s/%s is %s already\n", fleetBundleResource, key.Name, state)
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"rollout":{"paused":%t}}}`, pause)
	if err := c.Patch(ctx, fb, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return failed(fmt.Errorf("setting spec.rollout.paused of FleetBundle %s: %w", key, err))
	}
	fmt.Fprintf(out, "%s/%s %s\n", fleetBundleResource, key.Name, done)
	return nil
}
