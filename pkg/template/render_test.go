package template

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// euMember is the member most render tests render for.
var euMember = Member{Name: "member-a", Labels: map[string]string{"region": "eu", "env": "dev"}}

// goTemplate is a templated definition of message, data, labels and annotations.
func goTemplate(message string, data, labels, annotations map[string]string, overrides ...hubv1alpha1.TemplateOverride) *Definition {
	d := &Definition{TemplateEngine: hubv1alpha1.TemplateEngineGoTemplate, Overrides: overrides}
	d.Spec.Message = message
	d.Spec.Data = dataValues(data)
	d.Metadata.Labels = labels
	d.Metadata.Annotations = annotations
	return d
}

// manyValues is n keys, k00, k01, ..., each holding v.
func manyValues(n int, v string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = v
	}
	return m
}

func dataValues(m map[string]string) map[string]configbundlev1alpha1.DataValue {
	if m == nil {
		return nil
	}
	out := make(map[string]configbundlev1alpha1.DataValue, len(m))
	for k, v := range m {
		out[k] = configbundlev1alpha1.DataValue(v)
	}
	return out
}

// override selects the members with env=env.
func override(name, env string, message *string, data, labels, annotations map[string]string) hubv1alpha1.TemplateOverride {
	return hubv1alpha1.TemplateOverride{
		Name: name, ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}, Message: message,
		Data: dataValues(data), Labels: labels, Annotations: annotations,
	}
}

// TestRender: what a definition renders to for a member, templated or not, with overrides.
func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  *Definition
		want Rendered
	}{{
		name: "GoTemplate renders message, data, label and annotation values, never keys",
		def: goTemplate("endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}",
			map[string]string{"REGION": "{{ .Cluster.Labels.region }}", "{{.Cluster.Name}}": "x"},
			map[string]string{"region": "{{ .Cluster.Labels.region }}"},
			map[string]string{"owner": "team-{{ .Cluster.Name }}"}),
		want: Rendered{
			Labels:      map[string]string{"region": "eu"},
			Annotations: map[string]string{"owner": "team-member-a"},
			Spec: configbundlev1alpha1.ConfigBundleSpec{
				Message: "endpoint=https://api.eu.example.com cluster=member-a",
				Data:    dataValues(map[string]string{"REGION": "eu", "{{.Cluster.Name}}": "x"}),
			},
		},
	}, {
		name: "without an engine, {{ is placed literally",
		def: &Definition{ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{
			Metadata: hubv1alpha1.TemplateMetadata{Labels: map[string]string{"a": "b"}},
			Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: "x={{ .Cluster.Name }}", Data: dataValues(map[string]string{"K": "{{ nope"})},
		}},
		want: Rendered{Labels: map[string]string{"a": "b"}, Spec: configbundlev1alpha1.ConfigBundleSpec{
			Message: "x={{ .Cluster.Name }}", Data: dataValues(map[string]string{"K": "{{ nope"}),
		}},
	}, {
		name: "immutable and driftPolicy are placed as written",
		def: &Definition{ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "x", Immutable: true, DriftPolicy: configbundlev1alpha1.DriftPolicyReport},
		}},
		want: Rendered{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "x", Immutable: true, DriftPolicy: configbundlev1alpha1.DriftPolicyReport}},
	}, {
		name: "TemplateEngine None is as written too",
		def: &Definition{TemplateEngine: hubv1alpha1.TemplateEngineNone,
			ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "{{ range }}"}}},
		want: Rendered{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "{{ range }}"}},
	}, {
		name: "takeOver is placed as the template sets it",
		def: &Definition{ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "m", TakeOver: configbundlev1alpha1.TakeOverIfNoDiff}}},
		want: Rendered{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "m", TakeOver: configbundlev1alpha1.TakeOverIfNoDiff}},
	}, {
		name: "overrides in order: a later one wins, a non-matching one is skipped, message replaced, maps merged",
		def: goTemplate("base", map[string]string{"A": "a", "B": "b"}, map[string]string{"tier": "base", "keep": "k"}, map[string]string{"n": "1"},
			override("first", "dev", ptr.To("first {{ .Cluster.Name }}"), map[string]string{"B": "first", "C": "c"}, map[string]string{"tier": "first"}, nil),
			override("prod", "prod", ptr.To("prod"), map[string]string{"A": "prod"}, map[string]string{"tier": "prod"}, map[string]string{"n": "prod"}),
			override("second", "dev", ptr.To("second {{ .Cluster.Labels.region }}"), map[string]string{"C": "second"}, nil, map[string]string{"m": "2"})),
		want: Rendered{
			Labels:      map[string]string{"tier": "first", "keep": "k"},
			Annotations: map[string]string{"n": "1", "m": "2"},
			Spec:        configbundlev1alpha1.ConfigBundleSpec{Message: "second eu", Data: dataValues(map[string]string{"A": "a", "B": "first", "C": "second"})},
		},
	}, {
		name: "overrides apply without an engine, as written",
		def: &Definition{
			ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "base"}},
			Overrides:            []hubv1alpha1.TemplateOverride{override("dev", "dev", ptr.To("{{ .Cluster.Name }}"), nil, nil, nil)},
		},
		want: Rendered{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "{{ .Cluster.Name }}"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.def.Check(); err != nil {
				t.Fatalf("Check: %v", err)
			}
			got, err := tc.def.Render(euMember)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenderBuiltins: every built-in a template may call is known to the parser and works.
func TestRenderBuiltins(t *testing.T) {
	src := `{{ printf "%s-%d" .Cluster.Name (len .Cluster.Labels) }} {{ if eq .Cluster.Labels.env "dev" }}debug{{ else }}quiet{{ end }}` +
		` {{ index .Cluster.Labels "region" }} {{ and 1 "x" }} {{ or 0 "y" }} {{ not false }} {{ slice .Cluster.Name 0 6 }}` +
		` {{ print "p" }} {{ println "l" }}{{ html "<a>" }} {{ js "'" }} {{ urlquery "a b" }} {{ with .Cluster.Labels.region }}{{ . }}{{ end }}` +
		` {{ if and (ge 2 1) (gt 2 1) (le 1 2) (lt 1 2) (ne 1 2) }}cmp{{ end }}`
	d := goTemplate(src, nil, nil, nil)
	if err := d.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	got, err := d.Render(euMember)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	want := "member-a-2 debug eu x y true member p l\n&lt;a&gt; \\' a+b eu cmp"
	if got.Spec.Message != want {
		t.Errorf("message %q, want %q", got.Spec.Message, want)
	}
}

// TestCheckErrors: a definition that cannot render for any member is refused by Check, the error
// naming the field and what is wrong.
func TestCheckErrors(t *testing.T) {
	bad := hubv1alpha1.TemplateOverride{Name: "bad", ClusterSelector: metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}},
	}}
	for _, tc := range []struct {
		name string
		def  *Definition
		want []string
	}{
		{"range", goTemplate(`{{ range .Cluster.Labels }}x{{ end }}`, nil, nil, nil), []string{"spec.template.spec.message", "range is not allowed"}},
		{"range inside if", goTemplate(`{{ if 1 }}{{ range .Cluster.Labels }}x{{ end }}{{ end }}`, nil, nil, nil), []string{"range is not allowed"}},
		{"range in else", goTemplate(`{{ with 1 }}{{ else }}{{ range .Cluster.Labels }}x{{ end }}{{ end }}`, nil, nil, nil), []string{"range is not allowed"}},
		{"define", goTemplate(`{{ define "x" }}y{{ end }}`, nil, nil, nil), []string{"spec.template.spec.message", "define and block are not allowed"}},
		{"block", goTemplate(`{{ block "x" . }}y{{ end }}`, nil, nil, nil), []string{"spec.template.spec.message"}},
		{"template", goTemplate(`{{ template "x" }}`, nil, nil, nil), []string{"spec.template.spec.message", "template and block are not allowed"}},
		{"parse error in a data value", goTemplate("ok", map[string]string{"LOG_LEVEL": "{{ .Cluster.Name "}, nil, nil),
			[]string{"spec.template.spec.data[LOG_LEVEL]", "unclosed action"}},
		{"parse error in a label value", goTemplate("ok", nil, map[string]string{"region": "{{ end }}"}, nil), []string{"spec.template.metadata.labels[region]", "unexpected {{end}}"}},
		{"parse error in an annotation value", goTemplate("ok", nil, nil, map[string]string{"a": "{{ nosuchfunc }}"}),
			[]string{"spec.template.metadata.annotations[a]", `function "nosuchfunc" not defined`}},
		{"parse error in an override", goTemplate("ok", nil, nil, nil, override("dev", "dev", nil, map[string]string{"LOG_LEVEL": "{{"}, nil, nil)),
			[]string{"spec.overrides[dev].data[LOG_LEVEL]"}},
		{"more actions than MaxTemplateActions", goTemplate(strings.Repeat("{{ 1 }}", MaxTemplateActions+1), nil, nil, nil),
			[]string{"spec.template.spec.message", "1001 actions, more than the 1000"}},
		{"deep if nesting beyond MaxTemplateActions", goTemplate(strings.Repeat("{{ if 1 }}", 600)+strings.Repeat("{{ end }}", 600), nil, nil, nil),
			[]string{"1200 actions, more than the 1000"}},
		{"actions of more code than MaxTemplateCodeBytes", goTemplate("{{ print"+strings.Repeat(" 1", MaxTemplateCodeBytes)+" }}", nil, nil, nil),
			[]string{"spec.template.spec.message", "more than the 16384"}},
		{"values each within MaxTemplateCodeBytes, more in all", goTemplate("ok", manyValues(48, "{{ and"+strings.Repeat(" 1", 400)+" }}"), nil, nil),
			[]string{"spec.template.spec.data[", "more than the 16384 a definition may hold in all"}},
		{"deep paren nesting", goTemplate("{{"+strings.Repeat("(", 100000)+"1"+strings.Repeat(")", 100000)+"}}", nil, nil, nil),
			[]string{"spec.template.spec.message", "more than the 16384"}},
		{"invalid override selector", goTemplate("ok", nil, nil, nil, bad), []string{"spec.overrides[bad].clusterSelector", "is not a valid label selector operator"}},
		{"invalid override selector without an engine", &Definition{Overrides: []hubv1alpha1.TemplateOverride{bad}}, []string{"spec.overrides[bad].clusterSelector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.def.Check()
			if err == nil {
				t.Fatal("Check: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check: %v, want it to contain %q", err, w)
				}
			}
			if _, rerr := tc.def.Render(euMember); rerr == nil {
				t.Errorf("Render: no error, Check said %v", err)
			}
		})
	}
}

// TestRenderErrors: a definition that renders for some members but not this one (RenderFailed),
// the error naming the field.
func TestRenderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  *Definition
		want []string
	}{
		{"missing label", goTemplate("{{ .Cluster.Labels.zone }}", nil, nil, nil), []string{"spec.template.spec.message", `map has no entry for key "zone"`}},
		{"missing label in a data value", goTemplate("ok", map[string]string{"ZONE": "{{ .Cluster.Labels.zone }}"}, nil, nil),
			[]string{"spec.template.spec.data[ZONE]", "map has no entry for key"}},
		{"missing label in an override's label", goTemplate("ok", nil, nil, nil, override("dev", "dev", nil, nil, map[string]string{"zone": "{{ .Cluster.Labels.zone }}"}, nil)),
			[]string{"spec.overrides[dev].labels[zone]", "map has no entry for key"}},
		{"invalid rendered label value", goTemplate("ok", nil, map[string]string{"who": "{{ .Cluster.Name }} x"}, nil),
			[]string{"spec.template.metadata.labels[who]", `rendered "member-a x"`, "not a valid label value"}},
		{"label value over 63 characters", goTemplate("ok", nil, map[string]string{"long": strings.Repeat("{{ .Cluster.Name }}", 8)}, nil),
			[]string{"spec.template.metadata.labels[long]", "longer than the 63 bytes"}},
		{"message over the message limit", goTemplate(strings.Repeat("x", configbundlev1alpha1.MaxMessageBytes)+"{{ .Cluster.Name }}", nil, nil, nil),
			[]string{"spec.template.spec.message", "longer than the 1048576 bytes"}},
		{"data value over its limit", goTemplate("ok", map[string]string{"BIG": `{{ printf "%040000d" 1 }}`}, nil, nil),
			[]string{"spec.template.spec.data[BIG]", "longer than the 32768 bytes"}},
		{"message and data together over the limit", goTemplate(`{{ printf "%01040000d" 1 }}`, map[string]string{"K": `{{ printf "%020000d" 1 }}`}, nil, nil),
			[]string{"spec.template.spec.data[K]", "the rendered value is longer than the 8576 bytes left for it"}},
		{"annotations over their limit", goTemplate("ok", nil, nil, map[string]string{"a": `{{ printf "%0200000d" 1 }}`, "b": `{{ printf "%0200000d" 1 }}`}),
			[]string{"spec.template.metadata.annotations[b]", "the rendered value is longer than the 62142 bytes left for it"}},
		{"message and data over the escaped bound", goTemplate(strings.Repeat("<", 200000), map[string]string{"A": strings.Repeat("<", 30000), "B": strings.Repeat("<", 30000)}, nil, nil),
			[]string{"spec.template.spec.data[A]", "bytes once JSON-escaped, more than the 1310720"}},
		{"too many data keys once overrides are merged, without an engine", &Definition{
			ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "ok", Data: dataValues(manyValues(configbundlev1alpha1.MaxDataKeys, "v"))}},
			Overrides:            []hubv1alpha1.TemplateOverride{override("dev", "dev", nil, map[string]string{"EXTRA": "1"}, nil, nil)}},
			[]string{"49 keys once the overrides are merged, more than the 48"}},
		{"an invalid label value without an engine", &Definition{ConfigBundleTemplate: hubv1alpha1.ConfigBundleTemplate{
			Metadata: hubv1alpha1.TemplateMetadata{Labels: map[string]string{"region": "{{ .Cluster.Labels.region }}"}},
			Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: "ok"}}},
			[]string{"spec.template.metadata.labels[region]", "not a valid label value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.def.Check(); err != nil {
				t.Fatalf("Check: %v (a render error is the member's, not the definition's)", err)
			}
			_, err := tc.def.Render(euMember)
			if err == nil {
				t.Fatal("Render: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Render: %v, want it to contain %q", err, w)
				}
			}
		})
	}
}
