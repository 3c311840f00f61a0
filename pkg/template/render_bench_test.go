package template

import (
	"testing"

	"k8s.io/utils/ptr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// benchDefinition is a realistic templated FleetBundle: a message, 3 data values and 2 labels
// templated, and an override for the dev members.
func benchDefinition(engine hubv1alpha1.TemplateEngine) *Definition {
	d := goTemplate("endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}\nretries=3\ntimeout=30s\n",
		map[string]string{
			"REGION":   "{{ .Cluster.Labels.region }}",
			"ENDPOINT": "https://{{ .Cluster.Name }}.{{ .Cluster.Labels.region }}.internal:8443",
			"FEATURES": `{{ if eq .Cluster.Labels.env "prod" }}stable{{ else }}stable,preview{{ end }}`,
		},
		map[string]string{"region": "{{ .Cluster.Labels.region }}", "cluster": "{{ .Cluster.Name }}"}, nil,
		override("dev", "dev", ptr.To("endpoint=https://api.{{ .Cluster.Labels.region }}.dev.example.com debug=true\n"),
			map[string]string{"LOG_LEVEL": "debug"}, map[string]string{"tier": "dev"}, nil))
	d.TemplateEngine = engine
	return d
}

// BenchmarkRender is the cost of rendering a FleetBundle for one member: the realistic templated
// one (its override selecting the member) as the hub renders a revision (its values parsed once
// for every member), the same parsing its values anew (as Render, and hub render, do), and the
// same definition untemplated for comparison.
func BenchmarkRender(b *testing.B) {
	for _, bc := range []struct {
		name   string
		engine hubv1alpha1.TemplateEngine
		cached bool
	}{
		{"GoTemplate", hubv1alpha1.TemplateEngineGoTemplate, true},
		{"GoTemplate-parsing", hubv1alpha1.TemplateEngineGoTemplate, false},
		{"None", "", false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := benchDefinition(bc.engine)
			if err := d.Check(); err != nil {
				b.Fatal(err)
			}
			hash := ""
			if bc.cached {
				hash = Hash(d)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.RenderCached(euMember, hash); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
