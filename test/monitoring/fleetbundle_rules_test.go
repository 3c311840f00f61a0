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
	_, groups := loadRuleGroups(t)
	var rule *rules.AlertingRule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "FleetBundleFailing" {
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
		t.Fatal("no alert FleetBundleFailing")
	}

	// The history, one sample a minute for 40 minutes (failed members, per minute).
	start := time.Unix(0, 0).UTC()
	failing := func(cond bool, v float64) float64 {
		if cond {
			return v
		}
		return 0
	}
	series := map[[2]string]func(minute int) float64{
		{"team-a", "web"}:   func(m int) float64 { return failing(m < 30, 2) },   // 2 members fail for 30 minutes
		{"team-a", "flaky"}: func(m int) float64 { return failing(m%10 < 5, 1) }, // fails 5 minutes in 10
		{"team-b", "web"}:   func(int) float64 { return 0 },                      // healthy
	}
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	for key, failed := range series {
		ls := labels.FromMap(map[string]string{"__name__": "configbundle_fleetbundle_failed", "job": hubJob,
			"instance": "10.0.0.1:8443", "namespace": key[0], "name": key[1]})
		for m := 0; m <= 40; m++ {
			if _, err := app.Append(0, ls, timestamp.FromTime(start.Add(time.Duration(m)*time.Minute)), failed(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, Parser: promParser, Logger: slog.New(slog.DiscardHandler)})
	query := rules.EngineQueryFunc(engine, st)

	firingAt := map[int][]string{}
	for m := 0; m <= 40; m++ {
		if _, err := rule.Eval(context.Background(), 0, start.Add(time.Duration(m)*time.Minute), query, nil, 0); err != nil {
			t.Fatal(err)
		}
		for _, a := range rule.ActiveAlerts() {
			if a.State == rules.StateFiring {
				firingAt[m] = append(firingAt[m], a.Labels.Get("namespace")+"/"+a.Labels.Get("name"))
			}
		}
		slices.Sort(firingAt[m])
	}
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
