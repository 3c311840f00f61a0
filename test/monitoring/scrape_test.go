package monitoring

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/util/teststorage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The history the scrape is laid out as: one sample every step over the past span, ending at the
// scrape. Gauges keep their scraped value throughout; counters (histograms' buckets, sums and
// counts included) grow linearly from 0 to it, so that a counter that moved has a rate.
const (
	span = time.Hour
	step = 30 * time.Second
)

// TestExpressionsAgainstRealScrape evaluates every expression of the rules and the dashboard
// against what a real hub exports, and requires each to evaluate and to name only metrics the
// hub exports (inside absent() too, so that renaming a metric fails here). It then checks which
// alerts the fleet's state fires and that their annotations render.
func TestExpressionsAgainstRealScrape(t *testing.T) {
	exprs := expressions(t)
	f := startFleet(t)
	f.makeHistory(t)
	text := f.scrapeShowing(t, historyShown)
	ev := newEvaluator(t, text, time.Now())

	for _, e := range exprs {
		t.Run(e.Source, func(t *testing.T) {
			if _, err := ev.check(e.Query); err != nil {
				t.Error(err)
			}
		})
	}

	// The check fails an expression whose metric was renamed, inside absent() too: proven on
	// modified copies of the rules' expressions.
	for _, bad := range []struct{ name, query string }{
		{"renamed gauge", `max by (cluster) (configbundle_member_readyy) == 0`},
		{"renamed counter", `sum by (cluster) (rate(configbundle_heal_total[10m])) * 60 > 1`},
		{"renamed histogram", `histogram_quantile(0.99, sum by (cluster, le) (rate(configbundle_heal_latency_bucket[10m])))`},
		{"renamed metric in absent", `absent(configbundle_buildinfo{job="configbundle-hub-metrics"})`},
		{"label value no series has", `max(workqueue_depth{job="configbundle-hub-metrics", controller="configbundles"}) > 0`},
		{"renamed label", `max by (cluster) (configbundle_member_ready{member=~"m1|m2"}) == 0`},
		{"unknown Grafana variable", `sum(rate(configbundle_heals_total{cluster=~"$member"}[$__rate_interval]))`},
		{"does not parse", `sum by (cluster (configbundle_member_ready)`},
	} {
		t.Run("must fail/"+bad.name, func(t *testing.T) {
			if _, err := ev.check(bad.query); err == nil {
				t.Errorf("%s passed the check", bad.query)
			} else {
				t.Logf("fails as it should: %v", err)
			}
		})
	}

	t.Run("cluster variable", func(t *testing.T) {
		// label_values(configbundle_member_ready, cluster) lists the members.
		v, err := ev.check(`count by (cluster) (configbundle_member_ready)`)
		if err != nil {
			t.Fatal(err)
		}
		if got := clusters(v); !slices.Equal(got, []string{"m1", "m2"}) {
			t.Errorf("label_values(configbundle_member_ready, cluster) = %v, want [m1 m2]", got)
		}
	})

	t.Run("alerts", func(t *testing.T) { ev.checkAlerts(t, exprs) })

	// Last, as it breaks m2: an unreachable member is reported by ConfigBundleMemberNotReady,
	// and only it.
	t.Run("member not Ready", func(t *testing.T) {
		f.pause(t, "m2")
		ev := newEvaluator(t, f.scrapeShowing(t, []string{`configbundle_member_ready{cluster="m2"} 0`}), time.Now())
		for _, e := range exprs {
			if e.Alert == nil || e.Alert.Alert != "ConfigBundleMemberNotReady" {
				continue
			}
			v, err := ev.check(e.Query)
			if err != nil {
				t.Fatal(err)
			}
			if got := clusters(v); !slices.Equal(got, []string{"m2"}) {
				t.Errorf("%s fires for %v, want [m2]", e.Source, got)
			}
		}

		// The same member paused for maintenance (spec.paused, `hub pause`) pages nobody.
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))
		if err := f.Hub.Patch(context.Background(), &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m2"}}, patch); err != nil {
			t.Fatal(err)
		}
		ev = newEvaluator(t, f.scrapeShowing(t, []string{`configbundle_member_ready{cluster="m2"} 0`, `configbundle_member_paused{cluster="m2"} 1`}), time.Now())
		for _, e := range exprs {
			if e.Alert == nil || e.Alert.Alert != "ConfigBundleMemberNotReady" {
				continue
			}
			v, err := ev.check(e.Query)
			if err != nil {
				t.Fatal(err)
			}
			if got := clusters(v); len(got) != 0 {
				t.Errorf("%s fires for %v, paused; want none", e.Source, got)
			}
		}
	})
}

// wantFiring is which alerts the fleet of startFleet fires (with the history laid out as
// described at span), and for which members (or FleetBundles, namespace/name).
var wantFiring = map[string][]string{
	"ConfigBundleFightingWriter":      {"m1"},
	"ConfigBundleReconcileErrors":     {"m2"},
	"ConfigBundleMemberFailedBundles": {"m2"},
	"FleetBundleFailing":              {"monitoring/conflicted", "quota/halted"},
	"FleetBundleRolloutStalled":       {"quota/halted"},
}

// checkAlerts evaluates each alert's expression, compares what fires with wantFiring and
// renders the annotations of every series of the expression's left-hand side (the value before
// the threshold), so that templates are exercised whether the alert fires or not.
func (ev *evaluator) checkAlerts(t *testing.T, exprs []expression) {
	firing := map[string][]string{}
	for _, e := range exprs {
		if e.Alert == nil {
			continue
		}
		v, err := ev.check(e.Query)
		if err != nil {
			t.Errorf("%s: %v", e.Source, err)
			continue
		}
		for _, c := range firingFor(v) {
			if !slices.Contains(firing[e.Alert.Alert], c) {
				firing[e.Alert.Alert] = append(firing[e.Alert.Alert], c)
			}
		}
		if len(v.(promql.Vector)) > 0 {
			t.Logf("%s fires: %v", e.Source, v)
		}
		series := v.(promql.Vector)
		if lhs := thresholdLHS(e.Query); lhs != "" {
			lv, err := ev.check(lhs)
			if err != nil {
				t.Errorf("%s: %s: %v", e.Source, lhs, err)
				continue
			}
			series = lv.(promql.Vector)
		}
		for _, s := range series {
			for _, a := range []string{"summary", "description"} {
				out, err := ev.expand(e.Alert.Alert, e.Alert.Annotations[a], s)
				if err != nil || strings.Contains(out, "<no value>") || strings.Contains(out, "{{") {
					t.Errorf("%s: %s for %s renders as %q (%v)", e.Source, a, s.Metric, out, err)
				}
			}
		}
	}
	for alert := range firing {
		slices.Sort(firing[alert])
	}
	if !maps.EqualFunc(firing, wantFiring, slices.Equal) {
		t.Errorf("firing alerts (by member) = %v, want %v", firing, wantFiring)
	}
}

// thresholdLHS returns the left-hand side of an expression that compares a vector with a
// scalar threshold, or "" for any other.
func thresholdLHS(q string) string {
	expr, err := promParser.ParseExpr(q)
	if err != nil {
		return ""
	}
	for {
		p, ok := expr.(*parser.ParenExpr)
		if !ok {
			break
		}
		expr = p.Expr
	}
	b, ok := expr.(*parser.BinaryExpr)
	if !ok || !b.Op.IsComparisonOperator() || b.RHS.Type() != parser.ValueTypeScalar {
		return ""
	}
	return b.LHS.String()
}

// clusters returns the sorted cluster labels of an instant vector's series ("" for a series
// without one).
func clusters(v parser.Value) []string {
	vec, ok := v.(promql.Vector)
	if !ok {
		return nil
	}
	var out []string
	for _, s := range vec {
		out = append(out, s.Metric.Get("cluster"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// firingFor returns what each series of an instant vector is about, sorted: its member (the
// label cluster) or else its FleetBundle (namespace/name).
func firingFor(v parser.Value) []string {
	vec, _ := v.(promql.Vector)
	var out []string
	for _, s := range vec {
		about := s.Metric.Get("cluster")
		if about == "" && s.Metric.Has("name") {
			about = s.Metric.Get("namespace") + "/" + s.Metric.Get("name")
		}
		out = append(out, about)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// evaluator evaluates PromQL against a scrape loaded into a TSDB.
type evaluator struct {
	engine  *promql.Engine
	storage storage.Queryable
	at      time.Time
	// names are the metric names the scrape has, with the _bucket, _sum and _count series of
	// histograms and summaries, and up, which Prometheus adds to every scrape.
	names map[string]bool
}

// newEvaluator loads the scrape, taken at `at`, as a Prometheus scraping the ServiceMonitor's
// target would store it: with the target's job and instance labels and the up series.
func newEvaluator(t *testing.T, text string, at time.Time) *evaluator {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	ts := teststorage.New(t)
	ev := &evaluator{storage: ts, at: at, names: map[string]bool{"up": true},
		engine: promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, Parser: promParser,
			Logger: slog.New(slog.DiscardHandler)})}
	target := map[string]string{"job": hubJob, "instance": "10.0.0.1:8443"}
	app := ts.Appender(context.Background())
	add := func(name string, lbls map[string]string, v float64, counter bool) {
		m := maps.Clone(target)
		maps.Copy(m, lbls)
		m[model.MetricNameLabel] = name
		ls := labels.FromMap(m)
		ev.names[name] = true
		n := int(span / step)
		for i := 0; i <= n; i++ {
			val := v
			if counter {
				val = v * float64(i) / float64(n)
			}
			if _, err := app.Append(0, ls, timestamp.FromTime(at.Add(-span+time.Duration(i)*step)), val); err != nil {
				t.Fatalf("storing %s: %v", ls, err)
			}
		}
	}
	add("up", nil, 1, false)
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			addMetric(add, name, fam.GetType(), m)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return ev
}

// addMetric stores one metric of a family as its series.
func addMetric(add func(string, map[string]string, float64, bool), name string, typ dto.MetricType, m *dto.Metric) {
	lbls := map[string]string{}
	for _, lp := range m.GetLabel() {
		lbls[lp.GetName()] = lp.GetValue()
	}
	with := func(k, v string) map[string]string {
		l := maps.Clone(lbls)
		l[k] = v
		return l
	}
	switch typ {
	case dto.MetricType_COUNTER:
		add(name, lbls, m.GetCounter().GetValue(), true)
	case dto.MetricType_GAUGE:
		add(name, lbls, m.GetGauge().GetValue(), false)
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		inf := false
		for _, b := range h.GetBucket() {
			inf = inf || math.IsInf(b.GetUpperBound(), 1)
			add(name+"_bucket", with("le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), float64(b.GetCumulativeCount()), true)
		}
		if !inf {
			add(name+"_bucket", with("le", "+Inf"), float64(h.GetSampleCount()), true)
		}
		add(name+"_sum", lbls, h.GetSampleSum(), true)
		add(name+"_count", lbls, float64(h.GetSampleCount()), true)
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		for _, q := range s.GetQuantile() {
			add(name, with("quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)), q.GetValue(), false)
		}
		add(name+"_sum", lbls, s.GetSampleSum(), true)
		add(name+"_count", lbls, float64(s.GetSampleCount()), true)
	default:
		add(name, lbls, m.GetUntyped().GetValue(), false)
	}
}

// check substitutes the Grafana variables of q, requires every metric it names to be in the
// scrape and each of its selectors to select a series, and evaluates it as an instant query at
// the scrape's time.
func (ev *evaluator) check(q string) (parser.Value, error) {
	q, err := substitute(q)
	if err != nil {
		return nil, err
	}
	expr, err := promParser.ParseExpr(q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	names, err := metricNames(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	var missing []string
	for _, n := range names {
		if !ev.names[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: the hub's scrape has no %s", q, strings.Join(missing, ", "))
	}
	if err := ev.selectorsMatch(expr); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	return ev.eval(q)
}

// selectorsMatch requires every selector of expr to select a series of the scrape, so that a
// label renamed, or a label value that no series has, fails as a renamed metric does.
func (ev *evaluator) selectorsMatch(expr parser.Expr) error {
	var errs []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		sel := &parser.VectorSelector{Name: vs.Name, LabelMatchers: vs.LabelMatchers}
		v, err := ev.eval(sel.String())
		if err != nil {
			errs = append(errs, err.Error())
		} else if vec, _ := v.(promql.Vector); len(vec) == 0 {
			errs = append(errs, fmt.Sprintf("%s selects no series of the hub's scrape", sel))
		}
		return nil
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// eval evaluates q as an instant query at the scrape's time.
func (ev *evaluator) eval(q string) (parser.Value, error) {
	ctx := context.Background()
	qry, err := ev.engine.NewInstantQuery(ctx, ev.storage, nil, q, ev.at)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("%s: %w", q, res.Err)
	}
	return res.Value, nil
}

// expand renders an alert's annotation for one series as Prometheus's rule manager does.
func (ev *evaluator) expand(alert, text string, s promql.Sample) (string, error) {
	data := template.AlertTemplateData(s.Metric.Map(), nil, "", s)
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	query := func(ctx context.Context, q string, ts time.Time) (promql.Vector, error) {
		v, err := ev.check(q)
		if err != nil {
			return nil, err
		}
		vec, _ := v.(promql.Vector)
		return vec, nil
	}
	u, _ := url.Parse("http://prometheus.example")
	return template.NewTemplateExpander(context.Background(), defs+text, "__alert_"+alert, data,
		model.Time(timestamp.FromTime(ev.at)), query, u, nil).Expand()
}
