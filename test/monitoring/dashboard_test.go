package monitoring

import (
	"testing"
)

// TestDashboard checks the Grafana dashboard's structure: its variables, and that every panel
// has a title, uses the ${datasource} variable and queries something.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("the dashboard needs a title and a uid, has %q and %q", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (data source references by uid)", d.SchemaVersion)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || v.Query != "prometheus" {
		t.Errorf("want a variable datasource of type datasource for prometheus, have %+v", v)
	}
	if v, ok := vars["cluster"]; !ok || v.Type != "query" || !v.Multi || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
		t.Errorf("want a multi-value query variable cluster on ${datasource}, have %+v", v)
	}
	ids := map[int]bool{}
	panels := d.allPanels()
	if len(panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, p := range panels {
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want {prometheus ${datasource}}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q: target %s has no expr", p.Title, tg.RefID)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: target %s uses data source %q, want ${datasource}", p.Title, tg.RefID, tg.Datasource.UID)
			}
		}
	}
}
