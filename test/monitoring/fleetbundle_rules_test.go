package monitoring

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
)

// TestFleetBundleFailingRule tests FleetBundleFailing as `promtool test rules` would: over a
// history of configbundle_fleetbundle_failed, evaluated every minute as the rule manager does,
// it fires for a FleetBundle that has failed for its 10 minutes, and only once they have passed;
// never for one that failed for less, nor for a healthy one; once per FleetBundle, however many
// members failed; and it resolves when the failures go.
func TestFleetBundleFailingRule(t *testing.T) {
	firingAt := evalFleetBundleAlert(t, "FleetBundleFailing", "configbundle_fleetbundle_failed", 40, []fleetBundleHistory{
		{"team-a", "web", "10.0.0.1:8443", func(m int) float64 { return when(m < 30, 2) }},     // 2 members fail for 30 minutes
		{"team-a", "flaky", "10.0.0.1:8443", func(m int) float64 { return when(m%10 < 5, 1) }}, // fails 5 minutes in 10
		{"team-b", "web", "10.0.0.1:8443", func(int) float64 { return 0 }},                     // healthy
	})
	for _, tc := range []struct {
		minute int
		want   []string
	}{
		{0, nil}, {9, nil}, // pending for its 10 minutes
		{10, []string{"team-a/web"}}, {29, []string{"team-a/web"}},
		{30, nil}, {40, nil}, // resolved once nothing fails
	} {
		if !slices.Equal(firingAt[tc.minute], tc.want) {
			t.Errorf("minute %d: firing for %v, want %v", tc.minute, firingAt[tc.minute], tc.want)
		}
	}
	for m, got := range firingAt {
		if slices.Contains(got, "team-a/flaky") || slices.Contains(got, "team-b/web") {
			t.Errorf("minute %d: fires for %v, a FleetBundle that never failed for 10 minutes", m, got)
		}
	}
}

// TestFleetBundleRolloutStalledRule tests FleetBundleRolloutStalled the same way, over a history
// of configbundle_fleetbundle_rollout_stalled: it fires for a FleetBundle whose rollout has been
// stalled (halted or rolled back) for its 5 minutes, and only once they have passed; never for
// one whose canary failed briefly (a Halt clears by itself when the member recovers), nor for a
// rollout that goes on; once per FleetBundle, although a former leader still exports its 0 for
// it (max by (namespace, name)); and it resolves once the rollout can proceed (a fixed template,
// `hub rollout undo`, the member fixed).
func TestFleetBundleRolloutStalledRule(t *testing.T) {
	firingAt := evalFleetBundleAlert(t, "FleetBundleRolloutStalled", "configbundle_fleetbundle_rollout_stalled", 40, []fleetBundleHistory{
		{"team-a", "web", "10.0.0.1:8443", func(m int) float64 { return when(m >= 2 && m < 20, 1) }}, // halted from minute 2 to 20
		{"team-a", "web", "10.0.0.2:8443", func(int) float64 { return 0 }},                           // the former leader's series
		{"team-a", "flaky", "10.0.0.1:8443", func(m int) float64 { return when(m%10 < 4, 1) }},       // a canary failing 4 minutes in 10
		{"team-b", "web", "10.0.0.1:8443", func(int) float64 { return 0 }},                           // rolling out, or complete
	})
	for _, tc := range []struct {
		minute int
		want   []string
	}{
		{0, nil}, {2, nil}, {6, nil}, // pending for its 5 minutes
		{7, []string{"team-a/web"}}, {19, []string{"team-a/web"}},
		{20, nil}, {40, nil}, // resolved once the rollout can proceed
	} {
		if !slices.Equal(firingAt[tc.minute], tc.want) {
			t.Errorf("minute %d: firing for %v, want %v", tc.minute, firingAt[tc.minute], tc.want)
		}
	}
	for m, got := range firingAt {
		if slices.Contains(got, "team-a/flaky") || slices.Contains(got, "team-b/web") {
			t.Errorf("minute %d: fires for %v, a FleetBundle whose rollout never stalled for 5 minutes", m, got)
		}
	}
}

// fleetBundleHistory is one series of a per-FleetBundle gauge: a FleetBundle's, as the replica
// at instance exports it, its value per minute.
type fleetBundleHistory struct {
	namespace, name, instance string
	value                     func(minute int) float64
}

// when is v if cond, else 0.
func when(cond bool, v float64) float64 {
	if cond {
		return v
	}
	return 0
}

// evalFleetBundleAlert lays out the history of metric (one sample a minute for the minutes),
// evaluates the alert of the PrometheusRule over it every minute as the rule manager does, and
// returns the FleetBundles (namespace/name, sorted) it fires for at each minute.
func evalFleetBundleAlert(t *testing.T, alert, metric string, minutes int, history []fleetBundleHistory) map[int][]string {
	t.Helper()
	var series []seriesHistory
	for _, h := range history {
		series = append(series, seriesHistory{
			labels: map[string]string{"__name__": metric, "job": hubJob, "instance": h.instance, "namespace": h.namespace, "name": h.name},
			value:  h.value,
		})
	}
	firingAt := map[int][]string{}
	for m, alerts := range evalAlert(t, alert, minutes, series) {
		for _, a := range alerts {
			firingAt[m] = append(firingAt[m], a.Get("namespace")+"/"+a.Get("name"))
		}
		slices.Sort(firingAt[m])
		if len(slices.Compact(slices.Clone(firingAt[m]))) != len(firingAt[m]) {
			t.Errorf("minute %d: %s fires more than once for a FleetBundle: %v", m, alert, firingAt[m])
		}
	}
	return firingAt
}

// seriesHistory is one series of the history evalAlert lays out: its labels (__name__
// included) and its value per minute.
type seriesHistory struct {
	labels map[string]string
	value  func(minute int) float64
}

// evalAlert lays out the history of the series (one sample a minute for the minutes),
// evaluates the alert of the PrometheusRule over it every minute as the rule manager does, and
// returns the labels of the alerts firing at each minute (none: no entry).
func evalAlert(t *testing.T, alert string, minutes int, history []seriesHistory) map[int][]labels.Labels {
	t.Helper()
	_, groups := loadRuleGroups(t)
	var rule *rules.AlertingRule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != alert {
				continue
			}
			expr, err := promParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			rule = rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", false, slog.New(slog.DiscardHandler))
		}
	}
	if rule == nil {
		t.Fatalf("no alert %s", alert)
	}

	start := time.Unix(0, 0).UTC()
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	for _, h := range history {
		ls := labels.FromMap(h.labels)
		for m := 0; m <= minutes; m++ {
			if _, err := app.Append(0, ls, timestamp.FromTime(start.Add(time.Duration(m)*time.Minute)), h.value(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, Parser: promParser, Logger: slog.New(slog.DiscardHandler)})
	query := rules.EngineQueryFunc(engine, st)

	firingAt := map[int][]labels.Labels{}
	for m := 0; m <= minutes; m++ {
		if _, err := rule.Eval(context.Background(), 0, start.Add(time.Duration(m)*time.Minute), query, nil, 0); err != nil {
			t.Fatal(err)
		}
		for _, a := range rule.ActiveAlerts() {
			if a.State == rules.StateFiring {
				firingAt[m] = append(firingAt[m], a.Labels)
			}
		}
	}
	return firingAt
}
