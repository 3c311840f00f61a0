package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/template"
)

// Timeouts of the rollout tests, generous for a loaded two-core machine.
const (
	// rolloutStartTimeout bounds the start of the hub's control plane and its CRDs.
	rolloutStartTimeout = 3 * time.Minute
	// rolloutWaitTimeout bounds a wait for `hub rollout status --watch` to print or to exit.
	rolloutWaitTimeout = 30 * time.Second
	// rolloutPollInterval is how often such a wait looks.
	rolloutPollInterval = 20 * time.Millisecond
	// rolloutStatusTimeout is the --timeout of the status that must time out.
	rolloutStatusTimeout = 2 * time.Second
)

func TestRolloutUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"rollout"}, "want a subcommand: status, history, undo, pause, resume or approve"},
		{[]string{"rollout", "bogus"}, `unknown command "bogus" for "hub rollout"`},
		{[]string{"rollout", "status"}, "the FleetBundle's NAME is missing"},
		{[]string{"rollout", "history"}, "the FleetBundle's NAME is missing"},
		{[]string{"rollout", "undo"}, "the FleetBundle's NAME is missing"},
		{[]string{"rollout", "pause"}, "the FleetBundle's NAME is missing"},
		{[]string{"rollout", "resume", "a", "b"}, "want one NAME, got 2 arguments: a b"},
		{[]string{"rollout", "status", "Web"}, `"Web" is not a FleetBundle name`},
		{[]string{"rollout", "status", "web", "-n", "Apps"}, `--namespace "Apps" is not a namespace name`},
		{[]string{"rollout", "status", "web", "--timeout", "soon"}, "invalid argument"},
		{[]string{"rollout", "status", "web", "--timeout=-1s"}, "--timeout -1s is negative"},
		{[]string{"rollout", "status", "web", "--watch=maybe"}, "invalid argument"},
		{[]string{"rollout", "history", "web", "--revision", "-1"}, "--revision -1 is negative"},
		{[]string{"rollout", "history", "web", "--revision", "two"}, "invalid argument"},
		{[]string{"rollout", "undo", "web", "--to-revision", "-2"}, "--to-revision -2 is negative"},
		{[]string{"rollout", "undo", "web", "--revision", "2"}, "unknown flag: --revision"},
		{[]string{"rollout", "pause", "web", "--timeout", "1s"}, "unknown flag: --timeout"},
		{[]string{"rollout", "resume", "web", "--to-revision", "1"}, "unknown flag: --to-revision"},
		{[]string{"rollout", "history", "web", "--watch"}, "unknown flag: --watch"},
		{[]string{"rollout", "approve"}, "the FleetBundle's NAME is missing"},
		{[]string{"rollout", "approve", "web"}, "--stage is required"},
		{[]string{"rollout", "approve", "web", "--stage", "Prod"}, `--stage "Prod" is not a stage name`},
		{[]string{"rollout", "approve", "web", "--revision", "2", "--stage", "prod"}, "unknown flag: --revision"},
		{[]string{"rollout", "approve", "--removals"}, "the FleetBundle's NAME is missing"},
		{[]string{"rollout", "approve", "web", "--removals", "--stage", "prod"}, "give one"},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
}

// TestRolloutFlags: every subcommand takes the hub's flags and -n, in either flag style, and a
// command line that parses reaches the hub (a kubeconfig that does not exist: exit 1, not 2).
func TestRolloutFlags(t *testing.T) {
	for _, args := range [][]string{
		{"rollout", "status", "web"},
		{"rollout", "status", "web", "-n", "apps", "--watch=false", "--timeout", "1m"},
		{"rollout", "status", "-namespace=apps", "-timeout=10s", "web"},
		{"rollout", "history", "web", "--namespace", "apps", "--revision", "2"},
		{"rollout", "undo", "-n", "apps", "web", "--to-revision=1"},
		{"rollout", "pause", "web", "--hub-context", "hub"},
		{"rollout", "resume", "-hub-context=hub", "web"},
		{"rollout", "approve", "web", "-n", "apps", "--stage", "prod"},
		{"rollout", "approve", "web", "-n", "apps", "--removals"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "hub kubeconfig") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 1 on loading the hub kubeconfig", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	for _, sub := range []string{"status", "history", "undo", "pause", "resume", "approve"} {
		code, stdout, stderr := run(t, "rollout", sub, "--help")
		if code != exitOK || stderr != "" {
			t.Errorf("hub rollout %s --help: exit %d, stderr %q", sub, code, stderr)
		}
		for _, flag := range []string{"--hub-kubeconfig", "--hub-context", "-n, --namespace"} {
			if !strings.Contains(stdout, flag) {
				t.Errorf("hub rollout %s --help does not mention %s", sub, flag)
			}
		}
	}
}

// revisions returns the kept revisions numbered so, with templates of no interest.
func revisions(numbers ...int64) []fleetBundleRevision {
	revs := make([]fleetBundleRevision, len(numbers))
	for i, n := range numbers {
		revs[i] = fleetBundleRevision{number: n}
	}
	return revs
}

func TestRolloutUndoTarget(t *testing.T) {
	for _, tc := range []struct {
		name           string
		kept           []fleetBundleRevision
		updateRevision int64
		to             int64
		want           int64
		says           string // "" for no error
	}{
		{"the one before updateRevision", revisions(1, 2, 3), 3, 0, 2, ""},
		{"the highest kept below updateRevision, with gaps", revisions(1, 4, 7, 9), 9, 0, 7, ""},
		{"below an updateRevision no longer the highest", revisions(1, 2, 3), 2, 0, 1, ""},
		{"an updateRevision not kept", revisions(2, 3), 5, 0, 3, ""},
		{"--to-revision kept", revisions(1, 2, 3), 3, 1, 1, ""},
		{"--to-revision the updateRevision itself", revisions(1, 2, 3), 3, 3, 3, ""},
		{"--to-revision above updateRevision", revisions(1, 2, 3), 2, 3, 3, ""},
		{"--to-revision not kept", revisions(3, 4), 4, 2, 0, "revision 2 is not kept (kept: 3, 4)"},
		{"--to-revision, nothing kept", nil, 0, 1, 0, "revision 1 is not kept (no revision is kept)"},
		{"only the first revision", revisions(1), 1, 0, 0, "nothing to undo to: no revision below updateRevision 1 is kept (kept: 1)"},
		{"older ones not kept", revisions(5, 6), 5, 0, 0, "nothing to undo to: no revision below updateRevision 5 is kept (kept: 5, 6)"},
		{"no revision recorded yet", nil, 0, 0, 0, "nothing to undo to: the hub has recorded no revision yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := undoTarget(tc.kept, tc.updateRevision, tc.to)
			switch {
			case tc.says == "" && (err != nil || got != tc.want):
				t.Errorf("undoTarget = %d, %v; want %d", got, err, tc.want)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("undoTarget = %d, %v; want an error saying %q", got, err, tc.says)
			case strings.HasPrefix(tc.says, "nothing to undo") && !errors.Is(err, errNothingToUndo):
				t.Errorf("undoTarget's error %v does not wrap errNothingToUndo", err)
			}
		})
	}
}

// TestRolloutUndoSourcesPin: an undo to a revision with dataFrom pins its copy of the sources
// while they hold what they hold now (or, if they cannot be read, what updateRevision copied of
// them); one to a revision without sources pins nothing.
func TestRolloutUndoSourcesPin(t *testing.T) {
	withSources := func(n int64, ca string) fleetBundleRevision {
		d := &template.Definition{DataFrom: []hubv1alpha1.DataFromSource{{ConfigMapRef: &hubv1alpha1.SourceReference{Name: "ca"}}},
			Sources: map[string]string{"ca.crt": ca}}
		return fleetBundleRevision{number: n, template: d}
	}
	revs := []fleetBundleRevision{{number: 1, template: &template.Definition{}}, withSources(2, "PEM-2"), withSources(3, "PEM-3")}
	fb := &hubv1alpha1.FleetBundle{Status: hubv1alpha1.FleetBundleStatus{UpdateRevision: 3}}
	want := &hubv1alpha1.DataFromRevision{Revision: 2, SourcesHash: template.SourcesHash(map[string]string{"ca.crt": "PEM-3"})}
	if got := sourcesPin(fb, revs, 2, nil); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("sourcesPin to 2, the sources not read = %+v, want %+v", got, want)
	}
	read := map[string]string{"ca.crt": "PEM-4"} // changed since the hub copied it
	want.SourcesHash = template.SourcesHash(read)
	if got := sourcesPin(fb, revs, 2, read); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("sourcesPin to 2, the sources read = %+v, want %+v", got, want)
	}
	if got := sourcesPin(fb, revs, 1, nil); got != nil {
		t.Errorf("sourcesPin to a revision without sources = %+v, want none", got)
	}
}

// withRollout returns a FleetBundle of generation 2 with spec.rollout, its status observed
// (observedGeneration 2) with the revisions, phase and counts given.
func withRollout(update, current int64, phase hubv1alpha1.RolloutPhase, message string) *hubv1alpha1.FleetBundle {
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 2},
		Spec:       hubv1alpha1.FleetBundleSpec{Rollout: &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{Name: "canary"}}}},
		Status: hubv1alpha1.FleetBundleStatus{
			ObservedGeneration: 2, UpdateRevision: update, CurrentRevision: current,
			Clusters: hubv1alpha1.PlacementCounts{Selected: 3, Updated: 1, Ready: 2, Failed: 1},
		},
	}
	if phase != "" {
		fb.Status.Rollout = &hubv1alpha1.RolloutStatus{Stage: "canary", Phase: phase, Message: message}
	}
	return fb
}

// withoutRollout returns a FleetBundle of generation 2 without spec.rollout, its status observed,
// with the revisions and the Ready condition given.
func withoutRollout(update, current int64, ready metav1.ConditionStatus, reason string) *hubv1alpha1.FleetBundle {
	fb := withRollout(update, current, "", "")
	fb.Spec.Rollout = nil
	fb.Status.Conditions = []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: ready, Reason: reason, Message: "why " + reason, ObservedGeneration: 2}}
	return fb
}

func TestRolloutOutcome(t *testing.T) {
	stale := withRollout(3, 3, hubv1alpha1.RolloutComplete, "")
	stale.Generation = 3
	staleReady := withoutRollout(3, 3, metav1.ConditionTrue, hubv1alpha1.AllReadyReason)
	staleReady.Status.Conditions[0].ObservedGeneration = 1
	for _, tc := range []struct {
		name string
		fb   *hubv1alpha1.FleetBundle
		want rolloutOutcome
	}{
		{"Complete", withRollout(3, 3, hubv1alpha1.RolloutComplete, ""), rolloutComplete},
		{"Progressing", withRollout(3, 2, hubv1alpha1.RolloutProgressing, ""), rolloutWaiting},
		{"Soaking", withRollout(3, 2, hubv1alpha1.RolloutSoaking, ""), rolloutWaiting},
		{"Paused", withRollout(3, 2, hubv1alpha1.RolloutPaused, ""), rolloutWaiting},
		{"Halted", withRollout(3, 2, hubv1alpha1.RolloutHalted, ""), rolloutStopped},
		{"RolledBack", withRollout(3, 2, hubv1alpha1.RolloutRolledBack, ""), rolloutStopped},
		{"no status.rollout yet", withRollout(3, 2, "", ""), rolloutWaiting},
		{"Complete for an older generation", stale, rolloutWaiting},
		{"no spec.rollout, rolled out and Ready", withoutRollout(2, 2, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), rolloutComplete},
		{"no spec.rollout, no member selected", withoutRollout(1, 1, metav1.ConditionTrue, hubv1alpha1.NoClustersSelectedReason), rolloutComplete},
		{"no spec.rollout, not Ready", withoutRollout(2, 2, metav1.ConditionFalse, hubv1alpha1.ClustersFailedReason), rolloutWaiting},
		{"no spec.rollout, currentRevision behind", withoutRollout(3, 2, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), rolloutWaiting},
		{"no spec.rollout, no revision yet", withoutRollout(0, 0, metav1.ConditionTrue, hubv1alpha1.AllReadyReason), rolloutWaiting},
		{"no spec.rollout, Ready of an older generation", staleReady, rolloutWaiting},
	} {
		if got := outcomeOf(tc.fb); got != tc.want {
			t.Errorf("%s: outcomeOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestRolloutLine(t *testing.T) {
	stale := withRollout(3, 2, hubv1alpha1.RolloutProgressing, "waiting for eu-1")
	stale.Generation = 3
	consumers := withRollout(3, 2, hubv1alpha1.RolloutProgressing, "")
	consumers.Status.Rollout.Workloads = []hubv1alpha1.MemberWorkloads{{Cluster: "eu-1", Consumers: []hubv1alpha1.Consumer{
		{Kind: "Deployment", Name: "web", State: hubv1alpha1.ConsumerAvailable},
		{Kind: "StatefulSet", Name: "db", State: hubv1alpha1.ConsumerProgressing, Message: "1 of 2 replicas ready"}}}, {Cluster: "eu-2"}}
	for _, tc := range []struct {
		fb   *hubv1alpha1.FleetBundle
		want string
	}{
		{withRollout(3, 2, hubv1alpha1.RolloutProgressing, "updating eu-1 (1 of 1 at once)"),
			"updateRevision 3, currentRevision 2, stage canary, phase Progressing: 3 selected, 1 updated, 2 ready, 1 failed; updating eu-1 (1 of 1 at once)"},
		{withRollout(3, 3, hubv1alpha1.RolloutComplete, ""),
			"updateRevision 3, currentRevision 3, stage canary, phase Complete: 3 selected, 1 updated, 2 ready, 1 failed"},
		{withRollout(3, 2, hubv1alpha1.RolloutProgressing, "Stage canary: waiting for paused members eu-1, eu-2; resume them or set spec.rollout.skipPausedStages"),
			"updateRevision 3, currentRevision 2, stage canary, phase Progressing: 3 selected, 1 updated, 2 ready, 1 failed; Stage canary: waiting for paused members eu-1, eu-2; resume them or set spec.rollout.skipPausedStages"},
		{withRollout(0, 0, "", ""),
			"updateRevision 0, currentRevision 0, stage -, phase -: 3 selected, 1 updated, 2 ready, 1 failed"},
		{stale,
			"updateRevision 3, currentRevision 2, stage canary, phase Progressing: 3 selected, 1 updated, 2 ready, 1 failed; waiting for the hub to observe generation 3 (the status is of generation 2)"},
		{consumers,
			"updateRevision 3, currentRevision 2, stage canary, phase Progressing: 3 selected, 1 updated, 2 ready, 1 failed" +
				"\n  member eu-1: Deployment web Available; StatefulSet db Progressing (1 of 2 replicas ready)\n  member eu-2: no consumers"},
		{withoutRollout(2, 1, metav1.ConditionFalse, hubv1alpha1.ProgressingReason),
			"updateRevision 2, currentRevision 1, no spec.rollout, Ready=False Progressing: 3 selected, 1 updated, 2 ready, 1 failed; why Progressing"},
	} {
		if got := rolloutLine(tc.fb); got != tc.want {
			t.Errorf("rolloutLine =\n  %s\nwant\n  %s", got, tc.want)
		}
	}
}

func TestRolloutReportOutcome(t *testing.T) {
	halted := withRollout(3, 2, hubv1alpha1.RolloutHalted, "eu-1 failed (1 > maxFailures 0)")
	halted.Status.Clusters.Failed = 12
	for i := range hubv1alpha1.MaxFailedClusters {
		halted.Status.FailedClusters = append(halted.Status.FailedClusters, hubv1alpha1.ClusterFailure{Cluster: fmt.Sprintf("eu-%d", i+1), Reason: "CreateFailed"})
	}
	halted.Status.FailedClusters[0].Message = "denied by policy"
	rolledBack := withRollout(3, 2, hubv1alpha1.RolloutRolledBack, "eu-1 failed")
	for _, tc := range []struct {
		fb         *hubv1alpha1.FleetBundle
		o          rolloutOutcome
		out, error []string // what stdout and the error say
	}{
		{withRollout(3, 3, hubv1alpha1.RolloutComplete, ""), rolloutComplete, []string{"FleetBundle apps/web: revision 3 successfully rolled out\n"}, nil},
		{halted, rolloutStopped,
			[]string{"The rollout of revision 3 halted: eu-1 failed (1 > maxFailures 0)\nFailed members:\n  eu-1: CreateFailed: denied by policy\n  eu-2: CreateFailed\n", "  eu-10: CreateFailed\n  and 2 more\n"},
			[]string{"FleetBundle apps/web: the rollout of revision 3 is Halted"}},
		{rolledBack, rolloutStopped,
			[]string{"The rollout of revision 3 rolled back (members hold revision 2 again): eu-1 failed\n"},
			[]string{"FleetBundle apps/web: the rollout of revision 3 is RolledBack"}},
		{withRollout(3, 2, hubv1alpha1.RolloutPaused, ""), rolloutWaiting, nil,
			[]string{"FleetBundle apps/web: the rollout of revision 3 is not complete (phase Paused)"}},
		{withRollout(3, 2, hubv1alpha1.RolloutProgressing, "Stage canary: waiting for paused members eu-1, eu-2"), rolloutWaiting, nil,
			[]string{"FleetBundle apps/web: the rollout of revision 3 is not complete (phase Progressing: Stage canary: waiting for paused members eu-1, eu-2)"}},
	} {
		var out bytes.Buffer
		err := reportOutcome(&out, tc.fb, tc.o)
		for _, want := range tc.out {
			if !strings.Contains(out.String(), want) {
				t.Errorf("reportOutcome printed %q, want %q in it", out.String(), want)
			}
		}
		if len(tc.out) == 0 && out.Len() > 0 {
			t.Errorf("reportOutcome printed %q, want nothing", out.String())
		}
		switch {
		case tc.error == nil && err != nil:
			t.Errorf("reportOutcome = %v, want nil", err)
		case tc.error != nil && (err == nil || !errors.As(err, new(*failure))):
			t.Errorf("reportOutcome = %v, want a failure", err)
		}
		for _, want := range tc.error {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("reportOutcome = %v, want an error saying %q", err, want)
			}
		}
	}
}

func TestRolloutHistoryFormatting(t *testing.T) {
	for _, tc := range []struct {
		message string
		want    string
	}{
		{"", `""`},
		{"hello", `"hello"`},
		{"a\nb", `"a\nb"`},
		{"0123456789", `"0123456789"`},
		{"0123456789a", `"0123456789"...`},
		{"ééééééééééé", `"éééééééééé"...`},
	} {
		if got := shortMessage(tc.message, 10); got != tc.want {
			t.Errorf("shortMessage(%q, 10) = %s, want %s", tc.message, got, tc.want)
		}
	}
	st := &hubv1alpha1.FleetBundleStatus{CurrentRevision: 2, UpdateRevision: 3, Rollout: &hubv1alpha1.RolloutStatus{FailedRevision: 3}}
	for n, want := range map[int64]string{1: "-", 2: "current", 3: "update,failed"} {
		if got := revisionStatus(st, n); got != want {
			t.Errorf("revisionStatus(%d) = %q, want %q", n, got, want)
		}
	}
	if got := revisionStatus(&hubv1alpha1.FleetBundleStatus{CurrentRevision: 4, UpdateRevision: 4}, 4); got != "current,update" {
		t.Errorf("revisionStatus of a complete rollout = %q, want current,update", got)
	}
}

// rolloutHub is a hub control plane with the hub's CRDs for the rollout commands, and an admin
// client of it.
type rolloutHub struct {
	cp *controlplane.ControlPlane
	c  client.WithWatch
}

// startRolloutHub starts the hub's control plane with its CRDs, stopped when t ends. No hub runs:
// the tests write the ControllerRevisions and the statuses the hub would.
func startRolloutHub(t *testing.T) *rolloutHub {
	t.Helper()
	cp, c := startHubControlPlane(t, controlplane.Options{})
	return &rolloutHub{cp: cp, c: c}
}

// startHubControlPlane starts a hub's control plane with the hub's CRDs and opts, stopped when t
// ends, with the ClusterSet global bound into the namespace default, and returns it with an
// admin client.
func startHubControlPlane(t *testing.T, opts controlplane.Options) (*controlplane.ControlPlane, client.WithWatch) {
	t.Helper()
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	crds, err := config.HubCRDs()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), rolloutStartTimeout)
	defer cancel()
	opts.StartTimeout, opts.CRDs = rolloutStartTimeout, crds
	cps, err := controlplane.Start(ctx, controlplane.Named(opts, "hub")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlplane.StopAll(cps); err != nil {
			t.Error(err)
		}
	})
	scheme, err := hubmanager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cps[0].Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// A FleetBundle selects only among the members of the ClusterSets bound to its namespace:
	// the tests' FleetBundles, in default, may select any member, as config/samples'.
	fleet.MustBindGlobalWith(t, c, metav1.NamespaceDefault)
	return cps[0], c
}

// run runs `hub rollout SUBCOMMAND NAME args` against the hub.
func (h *rolloutHub) run(t *testing.T, sub, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return run(t, append([]string{"rollout", sub, name, "--hub-kubeconfig", h.cp.KubeconfigPath}, args...)...)
}

// messageTemplate returns a template of the message.
func messageTemplate(message string, labels map[string]string) hubv1alpha1.ConfigBundleTemplate {
	return hubv1alpha1.ConfigBundleTemplate{
		Metadata: hubv1alpha1.TemplateMetadata{Labels: labels},
		Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: message},
	}
}

// createFleetBundle creates the FleetBundle name in default with the template, selecting every
// member, with a rollout of a canary stage if staged.
func (h *rolloutHub) createFleetBundle(t *testing.T, name string, tmpl hubv1alpha1.ConfigBundleTemplate, staged bool) *hubv1alpha1.FleetBundle {
	t.Helper()
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec:       hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{}, Template: tmpl},
	}
	if staged {
		fb.Spec.Rollout = &hubv1alpha1.RolloutStrategy{
			Stages:    []hubv1alpha1.RolloutStage{{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}},
			OnFailure: hubv1alpha1.OnFailureHalt,
		}
	}
	if err := h.c.Create(t.Context(), fb); err != nil {
		t.Fatal(err)
	}
	return fb
}

// addRevision creates the ControllerRevision of revision n of fb, as the hub keeps it.
func (h *rolloutHub) addRevision(t *testing.T, fb *hubv1alpha1.FleetBundle, n int64, tmpl hubv1alpha1.ConfigBundleTemplate) {
	t.Helper()
	data, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: fb.Namespace, Name: fmt.Sprintf("%s-%d", fb.Name, n),
			Labels: map[string]string{hubv1alpha1.FleetBundleLabel: fleetbundle.LabelValue(client.ObjectKeyFromObject(fb))},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: hubv1alpha1.GroupVersion.String(), Kind: "FleetBundle", Name: fb.Name, UID: fb.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: n,
	}
	if err := h.c.Create(t.Context(), cr); err != nil {
		t.Fatal(err)
	}
}

// setStatus writes fb's status as the hub would, for its current generation, changed by set.
func (h *rolloutHub) setStatus(t *testing.T, name string, set func(*hubv1alpha1.FleetBundleStatus)) {
	t.Helper()
	fb := &hubv1alpha1.FleetBundle{}
	if err := h.c.Get(t.Context(), types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: name}, fb); err != nil {
		t.Fatal(err)
	}
	fb.Status.ObservedGeneration = fb.Generation
	set(&fb.Status)
	if err := h.c.Status().Update(t.Context(), fb); err != nil {
		t.Fatal(err)
	}
}

// rolloutAt sets the status of a rollout: the revisions, phase and message, and counts of 3
// selected members.
func rolloutAt(update, current int64, phase hubv1alpha1.RolloutPhase, message string) func(*hubv1alpha1.FleetBundleStatus) {
	return func(st *hubv1alpha1.FleetBundleStatus) {
		st.UpdateRevision, st.CurrentRevision = update, current
		st.Clusters = hubv1alpha1.PlacementCounts{Selected: 3, Applied: 3, Ready: 3, Updated: 1}
		st.Rollout = &hubv1alpha1.RolloutStatus{Stage: "canary", Phase: phase, Message: message}
		if phase == hubv1alpha1.RolloutComplete {
			st.Clusters.Updated = 3
			st.Rollout.Stage = hubv1alpha1.DefaultStageName
		}
	}
}

// TestRolloutCommands runs the rollout commands against a real hub API server.
func TestRolloutCommands(t *testing.T) {
	h := startRolloutHub(t)
	t.Run("history", h.testHistory)
	t.Run("undo", h.testUndo)
	t.Run("pause and resume", h.testPauseResume)
	t.Run("status", h.testStatus)
	t.Run("status --watch", h.testStatusWatch)
	t.Run("approve", h.testApprove)
}

func (h *rolloutHub) testHistory(t *testing.T) {
	fb := h.createFleetBundle(t, "history", messageTemplate("v3", nil), true)
	h.addRevision(t, fb, 1, messageTemplate("v1", nil))
	h.addRevision(t, fb, 3, messageTemplate("v3", nil))
	h.addRevision(t, fb, 2, messageTemplate("v2: a message longer than forty characters, shortened", map[string]string{"tier": "web"}))
	other := h.createFleetBundle(t, "history-other", messageTemplate("other", nil), false)
	h.addRevision(t, other, 4, messageTemplate("other", nil))
	// A revision of an earlier FleetBundle "history", since deleted: another uid's.
	gone := fb.DeepCopy()
	gone.UID = "0e9d2b5a-0000-4000-8000-000000000000"
	h.addRevision(t, gone, 9, messageTemplate("of the FleetBundle deleted", nil))
	h.setStatus(t, fb.Name, rolloutAt(3, 2, hubv1alpha1.RolloutProgressing, ""))

	code, stdout, stderr := h.run(t, "history", fb.Name)
	if code != exitOK || stderr != "" {
		t.Fatalf("hub rollout history: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := [][]string{
		{"fleetbundle.hub.configbundle.dev/history"},
		{"REVISION", "STATUS", "AGE", "MESSAGE"},
		{"1", "-", `"v1"`},
		{"2", "current", `"v2: a message longer than forty characte"...`},
		{"3", "update", `"v3"`},
	}
	if len(lines) != len(want) {
		t.Fatalf("hub rollout history printed %d lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, cells := range want {
		got := strings.Fields(lines[i])
		if i >= 2 { // the AGE between STATUS and MESSAGE varies
			got = append(got[:2], strings.Join(got[3:], " "))
		}
		if strings.Join(got, "|") != strings.Join(cells, "|") {
			t.Errorf("hub rollout history line %d = %q, want the cells %q", i+1, lines[i], cells)
		}
	}

	code, stdout, stderr = h.run(t, "history", fb.Name, "--revision", "2")
	if code != exitOK || stderr != "" {
		t.Fatalf("hub rollout history --revision 2: exit %d, stderr %q", code, stderr)
	}
	var got hubv1alpha1.ConfigBundleTemplate
	if err := yaml.UnmarshalStrict([]byte(stdout), &got); err != nil {
		t.Fatalf("hub rollout history --revision 2 printed no template: %v\n%s", err, stdout)
	}
	if wantTmpl := messageTemplate("v2: a message longer than forty characters, shortened", map[string]string{"tier": "web"}); !equality.Semantic.DeepEqual(got, wantTmpl) {
		t.Errorf("hub rollout history --revision 2 printed\n%s\nwant the template %+v", stdout, wantTmpl)
	}

	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{fb.Name, []string{"--revision", "9"}, "FleetBundle default/history has no revision 9 (kept: 1, 2, 3)"},
		{fb.Name, []string{"--revision", "4"}, "has no revision 4"},
		{"absent", nil, "no FleetBundle absent in namespace default"},
		{fb.Name, []string{"-n", "kube-system"}, "no FleetBundle history in namespace kube-system"},
	} {
		code, stdout, stderr := h.run(t, "history", tc.name, tc.args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, tc.says) {
			t.Errorf("hub rollout history %s %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", tc.name, strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}

	empty := h.createFleetBundle(t, "history-empty", messageTemplate("new", nil), false)
	code, stdout, _ = h.run(t, "history", empty.Name)
	if code != exitOK || !strings.Contains(stdout, "No revisions kept yet") {
		t.Errorf("hub rollout history of a FleetBundle without revisions: exit %d, stdout %q; want exit 0 saying so", code, stdout)
	}
}

func (h *rolloutHub) testUndo(t *testing.T) {
	v1 := messageTemplate("v1", nil)
	v2 := messageTemplate("v2", map[string]string{"tier": "web"})
	v3 := messageTemplate("v3", map[string]string{"tier": "api", "canary": "true"})
	v3.Metadata.Annotations = map[string]string{"note": "v3 only"}
	fb := h.createFleetBundle(t, "undo", v3, true)
	h.addRevision(t, fb, 1, v1)
	h.addRevision(t, fb, 2, v2)
	h.addRevision(t, fb, 3, v3)
	h.setStatus(t, fb.Name, rolloutAt(3, 2, hubv1alpha1.RolloutHalted, "canary-1 failed"))

	// templateIs checks the FleetBundle's template: exactly want, no label or annotation of the
	// template before left over by the merge patch.
	templateIs := func(want hubv1alpha1.ConfigBundleTemplate) {
		t.Helper()
		want.Spec.DriftPolicy = cmp.Or(want.Spec.DriftPolicy, configbundlev1alpha1.DriftPolicyHeal) // the API server's defaults
		want.Spec.TakeOver = cmp.Or(want.Spec.TakeOver, configbundlev1alpha1.TakeOverNever)
		got := &hubv1alpha1.FleetBundle{}
		if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(fb), got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got.Spec.Template, want) {
			t.Errorf("spec.template = %+v, want %+v", got.Spec.Template, want)
		}
		if got.Spec.Rollout == nil || len(got.Spec.Rollout.Stages) != 1 {
			t.Errorf("spec.rollout = %+v, want it left as it was", got.Spec.Rollout)
		}
	}

	code, stdout, stderr := h.run(t, "undo", fb.Name)
	if code != exitOK || stderr != "" || stdout != "fleetbundle.hub.configbundle.dev/undo rolled back to revision 2\n" {
		t.Fatalf("hub rollout undo: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	templateIs(v2)

	code, stdout, stderr = h.run(t, "undo", fb.Name, "--to-revision", "1")
	if code != exitOK || stderr != "" || stdout != "fleetbundle.hub.configbundle.dev/undo rolled back to revision 1\n" {
		t.Fatalf("hub rollout undo --to-revision 1: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	templateIs(v1)

	code, stdout, stderr = h.run(t, "undo", fb.Name, "--to-revision", "1")
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "skipped rollback (its template is revision 1 already)") {
		t.Errorf("hub rollout undo to the template it has: exit %d, stdout %q, stderr %q; want exit 0, skipped", code, stdout, stderr)
	}

	code, stdout, stderr = h.run(t, "undo", fb.Name, "--to-revision", "3")
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "rolled back to revision 3") {
		t.Errorf("hub rollout undo --to-revision 3: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	templateIs(v3)

	// A change of the spec between the read and the patch: the patch carries the resourceVersion
	// read, so it conflicts instead of overwriting the change unseen; undo reads again and
	// compares with the changed spec.
	var patches []error
	racing := interceptor.NewClient(h.c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if len(patches) == 0 {
				changed := &hubv1alpha1.FleetBundle{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), changed); err != nil {
					return err
				}
				changed.Spec.Template = messageTemplate("changed meanwhile", nil)
				if err := c.Update(ctx, changed); err != nil {
					return err
				}
			}
			err := c.Patch(ctx, obj, patch, opts...)
			patches = append(patches, err)
			return err
		},
	})
	var out bytes.Buffer
	if err := undo(t.Context(), racing, client.ObjectKeyFromObject(fb), 2, &out); err != nil || out.String() != "fleetbundle.hub.configbundle.dev/undo rolled back to revision 2\n" {
		t.Errorf("undo --to-revision 2 with a change meanwhile = %v, printed %q; want it rolled back to revision 2", err, out.String())
	}
	if len(patches) != 2 || !apierrors.IsConflict(patches[0]) || patches[1] != nil {
		t.Errorf("undo with a change meanwhile patched %d times (%v), want a conflict, then a patch", len(patches), patches)
	}
	templateIs(v2)

	first := h.createFleetBundle(t, "undo-first", v1, true)
	h.addRevision(t, first, 1, v1)
	h.setStatus(t, first.Name, rolloutAt(1, 0, hubv1alpha1.RolloutProgressing, ""))
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{fb.Name, []string{"--to-revision", "7"}, "FleetBundle default/undo: revision 7 is not kept (kept: 1, 2, 3)"},
		{first.Name, nil, "FleetBundle default/undo-first: nothing to undo to: no revision below updateRevision 1 is kept (kept: 1)"},
		{"absent", nil, "no FleetBundle absent in namespace default"},
	} {
		code, stdout, stderr := h.run(t, "undo", tc.name, tc.args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, tc.says) {
			t.Errorf("hub rollout undo %s %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", tc.name, strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
	templateIs(v2)
}

func (h *rolloutHub) testPauseResume(t *testing.T) {
	fb := h.createFleetBundle(t, "pause", messageTemplate("v1", nil), true)
	pausedIs := func(want bool) {
		t.Helper()
		got := &hubv1alpha1.FleetBundle{}
		if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(fb), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Rollout == nil || got.Spec.Rollout.Paused != want || len(got.Spec.Rollout.Stages) != 1 || got.Spec.Rollout.OnFailure != hubv1alpha1.OnFailureHalt {
			t.Errorf("spec.rollout = %+v, want paused %t and the rest as it was", got.Spec.Rollout, want)
		}
	}
	for _, step := range []struct {
		sub, says string
		paused    bool
	}{
		{"pause", "fleetbundle.hub.configbundle.dev/pause paused\n", true},
		{"pause", "fleetbundle.hub.configbundle.dev/pause is paused already\n", true},
		{"resume", "fleetbundle.hub.configbundle.dev/pause resumed\n", false},
		{"resume", "fleetbundle.hub.configbundle.dev/pause is not paused already\n", false},
	} {
		code, stdout, stderr := h.run(t, step.sub, fb.Name)
		if code != exitOK || stderr != "" || stdout != step.says {
			t.Errorf("hub rollout %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", step.sub, code, stdout, stderr, step.says)
		}
		pausedIs(step.paused)
	}

	plain := h.createFleetBundle(t, "pause-plain", messageTemplate("v1", nil), false)
	for _, sub := range []string{"pause", "resume"} {
		code, stdout, stderr := h.run(t, sub, plain.Name)
		if want := "FleetBundle default/pause-plain has no rollout to " + sub; code != exitFailure || stdout != "" || !strings.Contains(stderr, want) {
			t.Errorf("hub rollout %s of a FleetBundle without spec.rollout: exit %d, stdout %q, stderr %q; want exit 1 saying %q", sub, code, stdout, stderr, want)
		}
		code, _, stderr = h.run(t, sub, "absent")
		if code != exitFailure || !strings.Contains(stderr, "no FleetBundle absent in namespace default") {
			t.Errorf("hub rollout %s absent: exit %d, stderr %q; want exit 1, not found", sub, code, stderr)
		}
	}
	got := &hubv1alpha1.FleetBundle{}
	if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(plain), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Rollout != nil {
		t.Errorf("spec.rollout of a FleetBundle without one = %+v after pause, want none", got.Spec.Rollout)
	}
}

func (h *rolloutHub) testStatus(t *testing.T) {
	complete := h.createFleetBundle(t, "status-complete", messageTemplate("v2", nil), true)
	h.setStatus(t, complete.Name, rolloutAt(2, 2, hubv1alpha1.RolloutComplete, ""))

	halted := h.createFleetBundle(t, "status-halted", messageTemplate("v2", nil), true)
	h.setStatus(t, halted.Name, func(st *hubv1alpha1.FleetBundleStatus) {
		rolloutAt(2, 1, hubv1alpha1.RolloutHalted, "1 member failed, maxFailures is 0: canary-1")(st)
		st.Clusters.Failed = 1
		st.FailedClusters = []hubv1alpha1.ClusterFailure{{Cluster: "canary-1", Reason: "CreateFailed", Message: "denied by ValidatingAdmissionPolicy"}}
	})

	rolledBack := h.createFleetBundle(t, "status-rolledback", messageTemplate("v2", nil), true)
	h.setStatus(t, rolledBack.Name, func(st *hubv1alpha1.FleetBundleStatus) {
		rolloutAt(2, 1, hubv1alpha1.RolloutRolledBack, "rolled back revision 2: canary-1 failed")(st)
		st.Rollout.FailedRevision = 2
	})

	progressing := h.createFleetBundle(t, "status-progressing", messageTemplate("v2", nil), true)
	h.setStatus(t, progressing.Name, rolloutAt(2, 1, hubv1alpha1.RolloutSoaking, "canary soaks until 10:00:30"))

	plain := h.createFleetBundle(t, "status-plain", messageTemplate("v2", nil), false)
	h.setStatus(t, plain.Name, func(st *hubv1alpha1.FleetBundleStatus) {
		st.UpdateRevision, st.CurrentRevision = 1, 1
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionTrue,
			Reason: hubv1alpha1.AllReadyReason, Message: "3 of 3 Ready", ObservedGeneration: 1})
	})

	// The hub has not observed the last change of a complete one.
	stale := h.createFleetBundle(t, "status-stale", messageTemplate("v1", nil), true)
	h.setStatus(t, stale.Name, rolloutAt(1, 1, hubv1alpha1.RolloutComplete, ""))
	staleFB := &hubv1alpha1.FleetBundle{}
	if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(stale), staleFB); err != nil {
		t.Fatal(err)
	}
	staleFB.Spec.Template.Spec.Message = "v2"
	if err := h.c.Update(t.Context(), staleFB); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  []string
		err  string
	}{
		{complete.Name, nil, exitOK,
			[]string{"updateRevision 2, currentRevision 2, stage default, phase Complete: 3 selected, 3 updated, 3 ready, 0 failed\n",
				"FleetBundle default/status-complete: revision 2 successfully rolled out\n"}, ""},
		{complete.Name, []string{"--watch=false"}, exitOK, []string{"successfully rolled out"}, ""},
		{halted.Name, nil, exitFailure,
			[]string{"phase Halted", "The rollout of revision 2 halted: 1 member failed, maxFailures is 0: canary-1\n",
				"Failed members:\n  canary-1: CreateFailed: denied by ValidatingAdmissionPolicy\n"},
			"hub rollout status: FleetBundle default/status-halted: the rollout of revision 2 is Halted\n"},
		{rolledBack.Name, []string{"--timeout", "1m"}, exitFailure,
			[]string{"The rollout of revision 2 rolled back (members hold revision 1 again): rolled back revision 2: canary-1 failed\n"},
			"the rollout of revision 2 is RolledBack"},
		{progressing.Name, []string{"--timeout", rolloutStatusTimeout.String()}, exitFailure,
			[]string{"updateRevision 2, currentRevision 1, stage canary, phase Soaking: 3 selected, 1 updated, 3 ready, 0 failed; canary soaks until 10:00:30\n"},
			"FleetBundle default/status-progressing: timed out after 2s waiting for the rollout of revision 2 to complete (phase Soaking: canary soaks until 10:00:30)"},
		{progressing.Name, []string{"--watch=false"}, exitFailure, []string{"phase Soaking"},
			"the rollout of revision 2 is not complete (phase Soaking: canary soaks until 10:00:30)"},
		{plain.Name, nil, exitOK,
			[]string{"updateRevision 1, currentRevision 1, no spec.rollout, Ready=True AllReady: 0 selected, 0 updated, 0 ready, 0 failed; 3 of 3 Ready\n",
				"revision 1 successfully rolled out"}, ""},
		{stale.Name, []string{"--watch=false"}, exitFailure,
			[]string{"; waiting for the hub to observe generation 2 (the status is of generation 1)\n"},
			"the rollout of revision 1 is not complete (the hub has not observed generation 2 yet)"},
		{"absent", nil, exitFailure, nil, "hub rollout status: no FleetBundle absent in namespace default\n"},
	} {
		began := time.Now()
		code, stdout, stderr := h.run(t, "status", tc.name, tc.args...)
		if code != tc.code || (tc.err == "") != (stderr == "") || !strings.Contains(stderr, tc.err) {
			t.Errorf("hub rollout status %s %s: exit %d, stderr %q; want exit %d and %q on stderr", tc.name, strings.Join(tc.args, " "), code, stderr, tc.code, tc.err)
		}
		for _, want := range tc.out {
			if !strings.Contains(stdout, want) {
				t.Errorf("hub rollout status %s %s printed %q, want %q in it", tc.name, strings.Join(tc.args, " "), stdout, want)
			}
		}
		if strings.Contains(tc.err, "timed out") && time.Since(began) < rolloutStatusTimeout {
			t.Errorf("hub rollout status %s timed out after %s, before its --timeout %s", tc.name, time.Since(began), rolloutStatusTimeout)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startStatus runs `hub rollout status NAME --timeout rolloutWaitTimeout` in the background;
// wait returns its exit code once it exits.
func (h *rolloutHub) startStatus(name string) (stdout, stderr *syncBuffer, wait func() int) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- execute(context.Background(), []string{"rollout", "status", name, "--hub-kubeconfig", h.cp.KubeconfigPath, "--timeout", rolloutWaitTimeout.String()}, stdout, stderr)
	}()
	return stdout, stderr, func() int { return <-done }
}

// waitForOutput waits until out holds want.
func waitForOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(rolloutWaitTimeout); !strings.Contains(out.String(), want); time.Sleep(rolloutPollInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("hub rollout status printed %q, and not %q within %s", out.String(), want, rolloutWaitTimeout)
		}
	}
}

// testStatusWatch: `hub rollout status` follows the rollout, a line per change, until it
// completes, halts, or the FleetBundle is deleted.
func (h *rolloutHub) testStatusWatch(t *testing.T) {
	fb := h.createFleetBundle(t, "watch", messageTemplate("v2", nil), true)
	h.setStatus(t, fb.Name, rolloutAt(2, 1, hubv1alpha1.RolloutProgressing, "updating canary-1"))
	stdout, stderr, wait := h.startStatus(fb.Name)
	waitForOutput(t, stdout, "phase Progressing")
	h.setStatus(t, fb.Name, rolloutAt(2, 1, hubv1alpha1.RolloutSoaking, "canary soaks until 10:00:30"))
	waitForOutput(t, stdout, "phase Soaking")
	h.setStatus(t, fb.Name, func(st *hubv1alpha1.FleetBundleStatus) { st.Heals++ }) // no change to print
	h.setStatus(t, fb.Name, rolloutAt(2, 1, hubv1alpha1.RolloutProgressing, "updating eu-1, eu-2"))
	h.setStatus(t, fb.Name, rolloutAt(2, 2, hubv1alpha1.RolloutComplete, ""))
	if code := wait(); code != exitOK || stderr.String() != "" {
		t.Fatalf("hub rollout status: exit %d, stderr %q; want exit 0", code, stderr)
	}
	want := []string{
		"updateRevision 2, currentRevision 1, stage canary, phase Progressing: 3 selected, 1 updated, 3 ready, 0 failed; updating canary-1",
		"updateRevision 2, currentRevision 1, stage canary, phase Soaking: 3 selected, 1 updated, 3 ready, 0 failed; canary soaks until 10:00:30",
		// The informer may miss the intermediate Progressing: a line only if it saw it.
		"updateRevision 2, currentRevision 2, stage default, phase Complete: 3 selected, 3 updated, 3 ready, 0 failed",
		"FleetBundle default/watch: revision 2 successfully rolled out",
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool {
		return l == "updateRevision 2, currentRevision 1, stage canary, phase Progressing: 3 selected, 1 updated, 3 ready, 0 failed; updating eu-1, eu-2"
	})
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("hub rollout status printed\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// A rollout that halts while watched.
	halts := h.createFleetBundle(t, "watch-halts", messageTemplate("v2", nil), true)
	h.setStatus(t, halts.Name, rolloutAt(2, 1, hubv1alpha1.RolloutProgressing, "updating canary-1"))
	stdout, stderr, wait = h.startStatus(halts.Name)
	waitForOutput(t, stdout, "phase Progressing")
	h.setStatus(t, halts.Name, func(st *hubv1alpha1.FleetBundleStatus) {
		rolloutAt(2, 1, hubv1alpha1.RolloutHalted, "canary-1 failed")(st)
		st.Clusters.Failed = 1
		st.FailedClusters = []hubv1alpha1.ClusterFailure{{Cluster: "canary-1", Reason: hubv1alpha1.ProgressDeadlineExceededReason}}
	})
	if code := wait(); code != exitFailure || !strings.Contains(stderr.String(), "is Halted") ||
		!strings.Contains(stdout.String(), "phase Halted") || !strings.Contains(stdout.String(), "  canary-1: ProgressDeadlineExceeded\n") {
		t.Errorf("hub rollout status of a rollout that halts: exit %d, stdout %q, stderr %q; want exit 1, Halted and the failed member", code, stdout, stderr)
	}

	// A FleetBundle deleted while watched.
	deleted := h.createFleetBundle(t, "watch-deleted", messageTemplate("v2", nil), true)
	h.setStatus(t, deleted.Name, rolloutAt(2, 1, hubv1alpha1.RolloutPaused, "paused"))
	stdout, stderr, wait = h.startStatus(deleted.Name)
	waitForOutput(t, stdout, "phase Paused")
	if err := h.c.Delete(t.Context(), deleted); err != nil {
		t.Fatal(err)
	}
	if code := wait(); code != exitFailure || !strings.Contains(stderr.String(), "FleetBundle default/watch-deleted was deleted") {
		t.Errorf("hub rollout status of a FleetBundle deleted: exit %d, stderr %q; want exit 1 saying it was deleted", code, stderr)
	}
}
