package monitoring

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// TestRulesCheck checks the PrometheusRule as `promtool check rules` checks a rule file (its
// spec is one), and what this project asks more of every alert.
func TestRulesCheck(t *testing.T) {
	_, groups := loadRuleGroups(t)
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if _, err := promParser.ParseExpr(r.Expr); err != nil {
				t.Errorf("%s%s: %v", r.Alert, r.Record, err)
			}
			if r.Record != "" {
				if !regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`).MatchString(r.Record) {
					t.Errorf("record %s: name it level:metric:operations", r.Record)
				}
				continue
			}
			alerts[r.Alert] = true
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
			if u := r.Annotations["runbook_url"]; !strings.HasPrefix(u, "https://github.com/configbundle/hub/blob/main/docs/operations.md#") {
				t.Errorf("alert %s: runbook_url %q is not an anchor of docs/operations.md", r.Alert, u)
			}
		}
	}
	for _, want := range []string{"ConfigBundleHubAbsent", "ConfigBundleMemberNotReady", "ConfigBundleMemberCredentialsExpiring",
		"ConfigBundleHealRateHigh", "ConfigBundleReconcileErrors", "ConfigBundleMemberFailedBundles", "FleetBundleFailing", "FleetBundleRolloutStalled"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// TestAlertsSayWhichMember requires every alert whose series carry a member (the label cluster)
// to name it in its summary and description, and no alert to name a label its series lack.
func TestAlertsSayWhichMember(t *testing.T) {
	_, groups := loadRuleGroups(t)
	labelRef := regexp.MustCompile(`\$labels\.(\w+)`)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			expr, err := promParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			kept := outputLabels(expr)
			for _, a := range []string{"summary", "description"} {
				text := r.Annotations[a]
				if kept["cluster"] && !strings.Contains(text, "{{ $labels.cluster }}") {
					t.Errorf("alert %s: its %s does not say which member ({{ $labels.cluster }})", r.Alert, a)
				}
				for _, m := range labelRef.FindAllStringSubmatch(text, -1) {
					if !kept[m[1]] {
						t.Errorf("alert %s: its %s uses $labels.%s, which its expression does not keep", r.Alert, a, m[1])
					}
				}
			}
		}
	}
}

// outputLabels returns the labels an alert's expression is known to keep: the grouping of its
// outermost aggregation, or the equality matchers of absent(). Nil (nothing known) otherwise.
func outputLabels(expr parser.Expr) map[string]bool {
	switch e := expr.(type) {
	case *parser.ParenExpr:
		return outputLabels(e.Expr)
	case *parser.BinaryExpr:
		if l := outputLabels(e.LHS); l != nil {
			return l
		}
		return outputLabels(e.RHS)
	case *parser.AggregateExpr:
		if e.Without {
			return nil
		}
		kept := map[string]bool{}
		for _, l := range e.Grouping {
			kept[l] = true
		}
		return kept
	case *parser.Call:
		if e.Func.Name == "absent" {
			kept := map[string]bool{}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					for _, m := range vs.LabelMatchers {
						if m.Type.String() == "=" && m.Name != "__name__" {
							kept[m.Name] = true
						}
					}
				}
				return nil
			})
			return kept
		}
	}
	return nil
}

// TestRunbooksExist requires each alert's runbook anchor to be a heading of docs/operations.md
// (as GitHub makes anchors of headings).
func TestRunbooksExist(t *testing.T) {
	doc := runbookDoc
	if d := os.Getenv("MONITORING_RUNBOOK_DOC"); d != "" {
		doc = d
	}
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[githubAnchor(strings.TrimLeft(line, "#"))] = true
		}
	}
	_, groups := loadRuleGroups(t)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			u := r.Annotations["runbook_url"]
			if i := strings.Index(u, "#"); i >= 0 && !anchors[u[i+1:]] {
				t.Errorf("alert %s: runbook %s: %s has no heading #%s", r.Alert, u, doc, u[i+1:])
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
