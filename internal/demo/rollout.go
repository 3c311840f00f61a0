package demo

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// The staged rollout steps: a FleetBundle over every member, rolled out canary first;
// a good change soaks in the canary before the rest get it; a bad one is refused by the canary's
// own admission control, and the rollout halts with the rest of the fleet on the old value; a
// fixed template then rolls out.
const (
	// rolloutName is the FleetBundle of the rollout steps (config/samples/fleetbundle_rollout.yaml),
	// in the namespace default.
	rolloutName = "flags"
	// ringKey=canaryRing puts a member in the canary stage.
	ringKey, canaryRing = "ring", "canary"
	// demoSoak is the canary's soakTime in the demo (the sample's is 30s).
	demoSoak = 3 * time.Second
	// refusedFlag is what the canary's ValidatingAdmissionPolicy refuses in the ConfigMap.
	refusedFlag = "debug=true"
	// refusePolicy names the policy and its binding.
	refusePolicy = "refuse-debug-flags"
)

// The messages of the rollout's revisions.
const (
	flagsV1, flagsV2, flagsBad, flagsFixed = "checkout=v1 debug=false", "checkout=v2 debug=false", "checkout=v3 " + refusedFlag, "checkout=v3 debug=false"
)

// RolloutFleetBundle is the FleetBundle of config/samples/fleetbundle_rollout.yaml: every member,
// stages canary (the members labelled ring=canary, soakTime 30s) then rest, halting on failure.
// The demo applies it with the canary's soakTime at 3 s.
func RolloutFleetBundle() *hubv1alpha1.FleetBundle {
	return &hubv1alpha1.FleetBundle{
		TypeMeta:   metav1.TypeMeta{APIVersion: hubv1alpha1.GroupVersion.String(), Kind: "FleetBundle"},
		ObjectMeta: metav1.ObjectMeta{Name: rolloutName, Namespace: metav1.NamespaceDefault},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector:      &metav1.LabelSelector{},
			RevisionHistoryLimit: ptr.To[int32](10),
			Template: hubv1alpha1.ConfigBundleTemplate{
				Metadata: hubv1alpha1.TemplateMetadata{Labels: map[string]string{"app.kubernetes.io/part-of": "checkout"}},
				Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: flagsV1},
			},
			Rollout: &hubv1alpha1.RolloutStrategy{
				Stages: []hubv1alpha1.RolloutStage{
					{Name: canaryRing, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ringKey: canaryRing}},
						SoakTime: &metav1.Duration{Duration: 30 * time.Second}},
					{Name: "rest", ClusterSelector: &metav1.LabelSelector{}},
				},
				OnFailure: hubv1alpha1.OnFailureHalt,
			},
		},
	}
}

// rollout takes the tour of the staged rollout.
func (d *demo) rollout(ctx context.Context) error {
	if len(d.members) < 2 {
		d.say("==> The staged rollout needs 2 members (a canary and the rest): skipped with --members %d", len(d.members))
		return nil
	}
	fb := RolloutFleetBundle()
	fb.Spec.Rollout.Stages[0].SoakTime.Duration = demoSoak
	d.rolloutFB = fb
	canary := d.members[0].Name
	d.say("==> Staged rollout: FleetBundle %s over every member, the canary %s first; each change soaks there %s before the rest get it (docs/how-to/place-and-roll-out.md#staged-rollout)", rolloutName, canary, demoSoak)
	d.say("$ kubectl label memberclusters %s %s=%s", canary, ringKey, canaryRing)
	if err := d.fl.LabelMember(ctx, canary, map[string]string{ringKey: canaryRing}); err != nil {
		return err
	}
	d.say("$ kubectl apply -f config/samples/fleetbundle_rollout.yaml    # stages %s (%s=%s, soakTime %s here) then rest; onFailure Halt; message %q",
		canaryRing, ringKey, canaryRing, demoSoak, flagsV1)
	start := time.Now()
	if err := d.fl.Hub.Create(ctx, fb.DeepCopy()); err != nil {
		return fmt.Errorf("creating FleetBundle %s/%s: %w", fb.Namespace, fb.Name, err)
	}
	if err := d.rolledOut(ctx, 1, flagsV1, start, "the first placement follows the stages too"); err != nil {
		return err
	}
	d.placed += len(d.members)

	d.say("==> A change, staged: while the canary soaks, it alone holds the new value")
	if err := d.setFlags(ctx, flagsV2); err != nil {
		return err
	}
	start = time.Now()
	if err := d.poll(ctx, "the canary to hold revision 2", d.holds(canary, 2, flagsV2)); err != nil {
		return err
	}
	d.say("$ kubectl get configbundle,configmap %s    # in each member, during the canary's soak", rolloutName)
	if err := d.showRollout(ctx); err != nil {
		return err
	}
	if err := d.rolledOut(ctx, 2, flagsV2, start, ""); err != nil {
		return err
	}
	return d.haltAndFix(ctx)
}

// haltAndFix makes a change the canary refuses: the rollout halts, the rest keep the old value;
// then a fix rolls out.
func (d *demo) haltAndFix(ctx context.Context) error {
	canary, rest := d.members[0].Name, d.members[1:]
	d.say("==> A bad change: %s (the canary) refuses ConfigMaps with %s, by a ValidatingAdmissionPolicy of its own", canary, refusedFlag)
	d.say("$ kubectl --context %s apply -f refuse-debug-flags.yaml    # ValidatingAdmissionPolicy %s and its binding", canary, refusePolicy)
	if err := d.refuseDebugFlags(ctx, d.fl.Member(canary).Client); err != nil {
		return err
	}
	if err := d.setFlags(ctx, flagsBad); err != nil {
		return err
	}
	start := time.Now()
	took, err := d.until(ctx, map[string]wait.ConditionWithContextFunc{
		"failed": d.bundleFailed(canary, 3),
		"halted": d.phaseIs(3, hubv1alpha1.RolloutHalted),
	})
	if err != nil {
		return err
	}
	d.say("    the canary's bundle failed after %s (its reconciler's ConfigMap update refused); the rollout Halted after %s (both from the patch, polled every %s)",
		ms(took["failed"], start), ms(took["halted"], start), fastPoll)
	window := demoSoak + 2*time.Second
	if err := d.neverGet(ctx, rest, 3, window); err != nil {
		return err
	}
	d.say("    watched for %s more (longer than the soak): no other member got revision 3", window)
	d.say("$ kubectl get fleetbundle %s", rolloutName)
	if err := d.table(ctx, "namespaces/"+d.rolloutFB.Namespace+"/fleetbundles/"+rolloutName); err != nil {
		return err
	}
	if err := d.showRollout(ctx); err != nil {
		return err
	}
	if err := d.conditions(ctx); err != nil {
		return err
	}
	if err := d.rolloutStatus(ctx, 1); err != nil {
		return err
	}

	d.say("==> The fix: a new template (revision 4) rolls out, canary first; the halt was a state, not a latch")
	if err := d.setFlags(ctx, flagsFixed); err != nil {
		return err
	}
	start = time.Now()
	if err := d.rolledOut(ctx, 4, flagsFixed, start, ""); err != nil {
		return err
	}
	if err := d.rolloutStatus(ctx, 0); err != nil {
		return err
	}
	d.say("$ hub rollout history %s", rolloutName)
	out, code, err := d.hubCLI(ctx, "rollout", "history", rolloutName)
	if err != nil || code != 0 {
		return errors.Join(err, fmt.Errorf("hub rollout history exited %d: %s", code, out))
	}
	d.say("%s", strings.TrimRight(out, "\n"))
	d.say("$ kubectl get events --field-selector involvedObject.name=%s    # the rollout's Events", rolloutName)
	return d.rolloutEvents(ctx)
}

// rolloutStatus shows `hub rollout status --watch=false` and checks its exit code.
func (d *demo) rolloutStatus(ctx context.Context, want int) error {
	d.say("$ hub rollout status %s --watch=false; echo $?", rolloutName)
	out, code, err := d.hubCLI(ctx, "rollout", "status", rolloutName, "--watch=false")
	if err != nil {
		return err
	}
	d.say("%s\n%d", strings.TrimRight(out, "\n"), code)
	if code != want {
		return fmt.Errorf("hub rollout status exited %d, not %d", code, want)
	}
	return nil
}

// setFlags changes the rollout FleetBundle's message, as kubectl patch does.
func (d *demo) setFlags(ctx context.Context, message string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"message":%q}}}}`, message)
	d.say("$ kubectl patch fleetbundle %s --type merge -p '%s'", rolloutName, patch)
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: d.rolloutFB.Namespace, Name: rolloutName}}
	if err := d.fl.Hub.Patch(ctx, fb, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("patching FleetBundle %s: %w", rolloutName, err)
	}
	d.rolloutFB.Spec.Template.Spec.Message = message
	return nil
}

// rolledOut waits until revision rev, with message, is Complete, saying when each stage's members
// got it (from start), and prints the FleetBundle.
func (d *demo) rolledOut(ctx context.Context, rev int64, message string, start time.Time, note string) error {
	conds := map[string]wait.ConditionWithContextFunc{"complete": d.phaseIs(rev, hubv1alpha1.RolloutComplete)}
	for _, m := range d.members {
		conds[m.Name] = d.holds(m.Name, rev, message)
	}
	took, err := d.until(ctx, conds)
	if err != nil {
		return err
	}
	var parts []string
	for i, m := range d.members {
		stage := "rest"
		if i == 0 {
			stage = canaryRing
		}
		parts = append(parts, fmt.Sprintf("%s (%s) after %s", m.Name, stage, ms(took[m.Name], start)))
	}
	if note != "" {
		note = "; " + note
	}
	d.say("    revision %d's ConfigMap in %s; Complete after %s (polled every %s)%s", rev, strings.Join(parts, ", "), ms(took["complete"], start), fastPoll, note)
	d.say("$ kubectl get fleetbundle %s", rolloutName)
	return d.table(ctx, "namespaces/"+d.rolloutFB.Namespace+"/fleetbundles/"+rolloutName)
}

// placedRevision returns the revision of the rollout FleetBundle's bundle in member (0 if none),
// the bundle, and its ConfigMap's message ("" if none).
func (d *demo) placedRevision(ctx context.Context, member string) (int64, *configbundlev1alpha1.ConfigBundle, string, error) {
	c := d.fl.Member(member).Client
	key := client.ObjectKey{Namespace: d.rolloutFB.Namespace, Name: rolloutName}
	b := &configbundlev1alpha1.ConfigBundle{}
	switch err := c.Get(ctx, key, b); {
	case apierrors.IsNotFound(err):
		return 0, nil, "", nil
	case err != nil:
		return 0, nil, "", err
	}
	rev, _ := strconv.ParseInt(b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation], 10, 64)
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		return rev, b, "", client.IgnoreNotFound(err)
	}
	return rev, b, cm.Data[configbundlev1alpha1.MessageKey], nil
}

// holds returns a condition: member holds revision rev, and its ConfigMap message.
func (d *demo) holds(member string, rev int64, message string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		got, _, cm, err := d.placedRevision(ctx, member)
		return err == nil && got == rev && cm == message, nil
	}
}

// bundleFailed returns a condition: member holds revision rev and its bundle is Ready=False for
// its generation.
func (d *demo) bundleFailed(member string, rev int64) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		got, b, _, err := d.placedRevision(ctx, member)
		if err != nil || b == nil || got != rev || b.Status.ObservedGeneration != b.Generation {
			return false, nil
		}
		return meta.IsStatusConditionFalse(b.Status.Conditions, configbundlev1alpha1.ReadyCondition), nil
	}
}

// phaseIs returns a condition: the rollout FleetBundle's status, for its generation, has
// updateRevision rev in phase.
func (d *demo) phaseIs(rev int64, phase hubv1alpha1.RolloutPhase) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		fb := &hubv1alpha1.FleetBundle{}
		if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(d.rolloutFB), fb); err != nil {
			return false, nil
		}
		st := fb.Status
		return st.ObservedGeneration == fb.Generation && st.UpdateRevision == rev && st.Rollout != nil && st.Rollout.Phase == phase, nil
	}
}

// neverGet checks members for window: none of them ever holds revision rev.
func (d *demo) neverGet(ctx context.Context, members []*fleet.Member, rev int64, window time.Duration) error {
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		for _, m := range members {
			got, _, _, err := d.placedRevision(ctx, m.Name)
			if err != nil {
				return err
			}
			if got == rev {
				return fmt.Errorf("%s got revision %d although the canary failed", m.Name, rev)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// showRollout prints what each member holds of the rollout FleetBundle.
func (d *demo) showRollout(ctx context.Context) error {
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tSTAGE\tREVISION\tCONFIGBUNDLE\tCONFIGMAP DATA.MESSAGE")
	for i, m := range d.members {
		stage := "rest"
		if i == 0 {
			stage = canaryRing
		}
		rev, b, message, err := d.placedRevision(ctx, m.Name)
		if err != nil {
			return err
		}
		bundle := "<none>"
		if b != nil {
			bundle = "placed"
			if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil {
				bundle += ", " + c.Reason
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", m.Name, stage, rev, bundle, strconv.Quote(message))
	}
	return w.Flush()
}

// conditions prints the rollout FleetBundle's status.rollout and conditions, as kubectl get -o
// yaml shows them.
func (d *demo) conditions(ctx context.Context) error {
	fb := &hubv1alpha1.FleetBundle{}
	if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(d.rolloutFB), fb); err != nil {
		return err
	}
	d.say("$ kubectl get fleetbundle %s -o jsonpath='{.status.rollout}{.status.conditions}'    # abridged", rolloutName)
	if ro := fb.Status.Rollout; ro != nil {
		d.say("rollout: stage %s, phase %s, message %q", ro.Stage, ro.Phase, ro.Message)
	}
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "TYPE\tSTATUS\tREASON")
	for _, c := range fb.Status.Conditions {
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.Type, c.Status, c.Reason)
	}
	return w.Flush()
}

// rolloutEvents prints the rollout FleetBundle's Events of the rollout, oldest first.
func (d *demo) rolloutEvents(ctx context.Context) error {
	reasons := map[string]bool{hubv1alpha1.StageStartedEvent: true, hubv1alpha1.StageCompletedEvent: true, hubv1alpha1.RolloutHaltedEvent: true,
		hubv1alpha1.RolledBackEvent: true, hubv1alpha1.RolloutCompleteEvent: true}
	cs, err := kubernetes.NewForConfig(d.fl.HubPlane.Config)
	if err != nil {
		return err
	}
	// The last Event (RolloutComplete of revision 4) may be recorded a moment after the status.
	// client-go's events.k8s.io recorder makes a series of the Events of the same object, reason,
	// action and related object, keeping the first one's note, and writes a series' count only
	// from its second Event on, then every 30 minutes: revision 4's RolloutComplete may show as
	// revision 1's, a series of 2.
	var list *eventsv1.EventList
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := cs.EventsV1().Events(d.rolloutFB.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		list = l
		for _, e := range list.Items {
			if e.Regarding.Name == rolloutName && e.Reason == hubv1alpha1.RolloutCompleteEvent &&
				(strings.Contains(e.Note, "Revision 4") || e.Series != nil) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var seen []string
		if list != nil {
			for _, e := range list.Items {
				seen = append(seen, fmt.Sprintf("%s %s/%s %s: %q (series %v)", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Type, e.Note, e.Series))
			}
		}
		return fmt.Errorf("waiting for the RolloutComplete Event of revision 4: %w (Events in %s: %s)", err, d.rolloutFB.Namespace, strings.Join(seen, "; "))
	}
	items := slices.Clone(list.Items)
	slices.SortStableFunc(items, func(a, b eventsv1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	var events []string
	for _, e := range items {
		if e.Regarding.Kind == "FleetBundle" && e.Regarding.Name == rolloutName && reasons[e.Reason] {
			note := e.Note
			if e.Series != nil {
				note += fmt.Sprintf(" (x%d)", e.Series.Count)
			}
			events = append(events, e.Type+"\t"+e.Reason+"\tfleetbundle/"+e.Regarding.Name+"\t"+note)
		}
	}
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "TYPE\tREASON\tOBJECT\tMESSAGE")
	for _, e := range events {
		fmt.Fprintln(w, e)
	}
	return w.Flush()
}

// eventTime is when an Event was last seen.
func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	default:
		return e.EventTime.Time
	}
}

// hubCLI runs the hub binary against the hub cluster with args, and returns its output and exit
// code; err only if it could not run.
func (d *demo) hubCLI(ctx context.Context, args ...string) (string, int, error) {
	args = append(args, "--hub-kubeconfig", d.fl.HubKubeconfig, "-n", d.rolloutFB.Namespace)
	out, err := exec.CommandContext(ctx, d.opts.HubBinary, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0, nil
	case errors.As(err, &exit):
		return string(out), exit.ExitCode(), nil
	default:
		return string(out), -1, fmt.Errorf("running hub %s: %w", strings.Join(args, " "), err)
	}
}

// refuseDebugFlags installs, with c, a ValidatingAdmissionPolicy and its binding that refuse
// (Forbidden) any ConfigMap whose message holds refusedFlag, and
// returns once the API server enforces them (it loads policies asynchronously: dry-run creates
// probe it).
func (d *demo) refuseDebugFlags(ctx context.Context, c client.Client) error {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: refusePolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.data) || !(%q in object.data) || !object.data[%q].contains(%q)",
					configbundlev1alpha1.MessageKey, configbundlev1alpha1.MessageKey, refusedFlag),
				Message: refusedFlag + " is refused in this cluster",
				Reason:  ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: refusePolicy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: refusePolicy, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", refusePolicy, err)
		}
	}
	// A dry run creates nothing.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.rolloutFB.Namespace, Name: rolloutName + "-probe"},
		Data: map[string]string{configbundlev1alpha1.MessageKey: flagsBad}}
	return d.poll(ctx, "the policy to be in force", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err), nil
	})
}
