// Package monitoring tests the Prometheus rules of config/prometheus and the Grafana dashboard of
// config/grafana: that they parse and check as promtool would, and that every expression in them
// evaluates against what a real hub exports, so that a renamed metric fails here rather than in
// someone's silent dashboard.
//
// It is a module of its own so that Prometheus's dependencies stay out of the hub's go.mod.
package monitoring

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The files under test, relative to this directory.
var (
	ruleFile      = filepath.Join("..", "..", "config", "prometheus", "prometheusrule.yaml")
	dashboardFile = filepath.Join("..", "..", "config", "grafana", "configbundle-hub.json")
	// runbookDoc holds the runbooks the alerts link to; MONITORING_RUNBOOK_DOC overrides it (to
	// check a draft of the documentation).
	runbookDoc = filepath.Join("..", "..", "docs", "operations.md")
)

// hubJob is the job label of the hub's series under config/prometheus's ServiceMonitor.
const hubJob = "configbundle-hub-metrics"

// promParser parses PromQL as a Prometheus server with default flags does.
var promParser = parser.NewParser(parser.Options{})

// prometheusRule is the part of a PrometheusRule the tests read.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// loadRuleGroups reads config/prometheus/prometheusrule.yaml and returns its spec (the rule
// groups, in the format of a Prometheus rule file) as YAML, and the parsed groups.
func loadRuleGroups(t *testing.T) ([]byte, *rulefmt.RuleGroups) {
	t.Helper()
	raw, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(raw, &pr); err != nil {
		t.Fatalf("%s: %v", ruleFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", ruleFile, pr.APIVersion, pr.Kind)
	}
	spec, err := yaml.JSONToYAML(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promParser, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: rules do not check: %v", ruleFile, errs)
	}
	return spec, groups
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []target    `json:"targets"`
	Panels     []panel     `json:"panels"` // of a collapsed row
}

type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *datasource `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Query      any         `json:"query"`
	Datasource *datasource `json:"datasource"`
	Multi      bool        `json:"multi"`
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{}
	if err := json.Unmarshal(raw, d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the dashboard's panels but rows, those of collapsed rows included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// expression is one PromQL expression of the rules or the dashboard.
type expression struct {
	// Source says where it is, e.g. `alert ConfigBundleMemberNotReady (warning)`.
	Source string
	// Query is the expression as written (Grafana variables not substituted).
	Query string
	// Alert is the alerting rule it is the expression of, if any.
	Alert *rulefmt.Rule
}

// expressions returns every expression of the rules and the dashboard.
func expressions(t *testing.T) []expression {
	t.Helper()
	var out []expression
	_, groups := loadRuleGroups(t)
	for _, g := range groups.Groups {
		for i := range g.Rules {
			r := &g.Rules[i]
			if r.Alert != "" {
				out = append(out, expression{Source: fmt.Sprintf("alert %s (%s)", r.Alert, r.Labels["severity"]), Query: r.Expr, Alert: r})
			} else {
				out = append(out, expression{Source: "record " + r.Record, Query: r.Expr})
			}
		}
	}
	for _, p := range loadDashboard(t).allPanels() {
		for _, tg := range p.Targets {
			out = append(out, expression{Source: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), Query: tg.Expr})
		}
	}
	return out
}

// grafanaVars are the values the dashboard's variables get when its expressions are evaluated:
// $cluster as Grafana renders a multi-value selection in a regex matcher, the intervals as
// Grafana computes them for a 1h range at the scrape interval the history is laid out with.
var grafanaVars = map[string]string{
	"cluster":         "(m1|m2)",
	"__rate_interval": "2m",
	"__interval":      "30s",
	"__interval_ms":   "30000",
	"__range":         "1h",
	"__range_s":       "3600",
	"__range_ms":      "3600000",
	"__auto":          "30s",
	"datasource":      "prometheus",
	"__dashboard":     "configbundle-hub",
	"__org":           "1",
	"__name":          "",
	"__user":          "",
	"__timeFilter":    "",
	"__from":          "0",
	"__to":            "3600000",
	"__all":           ".*",
}

var grafanaVarRE = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// substitute replaces the Grafana variables in q; it fails on a variable it does not know.
func substitute(q string) (string, error) {
	var unknown []string
	out := grafanaVarRE.ReplaceAllStringFunc(q, func(m string) string {
		sub := grafanaVarRE.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		v, ok := grafanaVars[name]
		if !ok {
			unknown = append(unknown, name)
			return m
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown Grafana variable(s) %s in %q", strings.Join(unknown, ", "), q)
	}
	return out, nil
}

// metricNames returns the metric names an expression selects, absent()'s argument included,
// sorted and without duplicates. A selector without a name (only {__name__=~"..."}) is an error:
// it could not be checked against the scrape.
func metricNames(expr parser.Expr) ([]string, error) {
	var names []string
	var err error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" && m.Type.String() == "=" {
					name = m.Value
				}
			}
		}
		if name == "" {
			err = fmt.Errorf("selector %s names no metric", vs)
			return nil
		}
		names = append(names, name)
		return nil
	})
	slices.Sort(names)
	return slices.Compact(names), err
}
