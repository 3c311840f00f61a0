package template

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Definition is what a FleetBundle's revision holds: its template, how it is rendered and its
// overrides. Encoded, it is a ConfigBundleTemplate with templateEngine and overrides beside
// metadata and spec when they are set, so that the revisions of a FleetBundle that sets neither
// are encoded (and hashed) as before they existed.
type Definition struct {
	hubv1alpha1.ConfigBundleTemplate

	// TemplateEngine is "" for None.
	TemplateEngine hubv1alpha1.TemplateEngine `json:"templateEngine,omitempty"`

	Overrides []hubv1alpha1.TemplateOverride `json:"overrides,omitempty"`

	// DataFrom is the FleetBundle's spec.dataFrom, and Sources what its sources resolved to
	// (ResolveSources): data under the template's, placed as written, never templated. The
	// revision keeps them, so that it places the same content whatever the sources hold later.
	DataFrom []hubv1alpha1.DataFromSource `json:"dataFrom,omitempty"`
	Sources  map[string]string            `json:"sources,omitempty"`

	// SourcesHash, with target Secret, identifies what the secretRef sources resolved to
	// (SecretHash): the revision keeps it in place of Sources, and the values in its snapshot
	// Secret (SnapshotName). SecretSources are those values, when read from the sources now:
	// never encoded, never in a revision.
	SourcesHash   string            `json:"sourcesHash,omitempty"`
	SecretSources map[string]string `json:"-"`
}

// DefinitionOf is the definition a FleetBundle's spec gives, its sources not read: Sources is
// nil (see ResolveSources).
func DefinitionOf(fb *hubv1alpha1.FleetBundle) Definition {
	d := Definition{ConfigBundleTemplate: fb.Spec.Template, TemplateEngine: fb.Spec.TemplateEngine, Overrides: fb.Spec.Overrides,
		DataFrom: fb.Spec.DataFrom}
	if d.TemplateEngine == hubv1alpha1.TemplateEngineNone {
		d.TemplateEngine = ""
	}
	// The defaults, as a FleetBundle written before driftPolicy, takeOver, target and secretType
	// existed has them.
	if d.Spec.DriftPolicy == configbundlev1alpha1.DriftPolicyHeal {
		d.Spec.DriftPolicy = ""
	}
	if d.Spec.TakeOver == configbundlev1alpha1.TakeOverNever {
		d.Spec.TakeOver = ""
	}
	if d.Spec.Target == configbundlev1alpha1.TargetConfigMap {
		d.Spec.Target = ""
	}
	if d.Spec.SecretType == configbundlev1alpha1.SecretTypeOpaque {
		d.Spec.SecretType = ""
	}
	return d
}

// PerMember reports whether the definition renders differently for different members: it is
// templated, or it has overrides.
func (d *Definition) PerMember() bool {
	return d.TemplateEngine == hubv1alpha1.TemplateEngineGoTemplate || len(d.Overrides) > 0
}

// Member is what a template sees of a member: .Cluster.Name and .Cluster.Labels, those of its
// MemberCluster.
type Member struct {
	Name   string
	Labels map[string]string
}

// templateData is the data a template is executed with.
type templateData struct {
	Cluster Member
}

// Rendered is what a definition renders to for one member: the labels, annotations and spec of
// its ConfigBundle, before the hub's own label and annotations.
type Rendered struct {
	Labels      map[string]string
	Annotations map[string]string
	Spec        configbundlev1alpha1.ConfigBundleSpec
}

// value is one value of a definition, named by the field it comes from; a literal one (a
// source's) is placed as written, whatever the templateEngine.
type value struct {
	field   string
	text    string
	literal bool
}

// Check returns why the definition cannot be rendered for any member (InvalidTemplate): an
// override's clusterSelector is invalid, or, with GoTemplate, a value does not parse or uses an
// action a template may not use. The error names the field.
func (d *Definition) Check() error {
	for i := range d.Overrides {
		if _, err := metav1.LabelSelectorAsSelector(&d.Overrides[i].ClusterSelector); err != nil {
			return fmt.Errorf("spec.overrides[%s].clusterSelector: %w", d.Overrides[i].Name, err)
		}
	}
	if d.TemplateEngine != hubv1alpha1.TemplateEngineGoTemplate {
		return nil
	}
	values := d.values()
	if err := checkCodeBytes(values); err != nil {
		return err
	}
	for _, v := range values {
		if _, err := parseValue(v.field, v.text); err != nil {
			return err
		}
	}
	return nil
}

// checkCodeBytes refuses values whose actions hold more than MaxTemplateCodeBytes in all, so
// that what parsing and executing them costs for each member is bounded whatever their number.
func checkCodeBytes(values []value) error {
	n, largest, largestN := 0, "", -1
	for _, v := range values {
		c := codeBytes(v.text)
		if n += c; c > largestN {
			largest, largestN = v.field, c
		}
	}
	if n > MaxTemplateCodeBytes {
		return fmt.Errorf("%s: its actions hold %d bytes besides their strings, and the templated values' %d in all, more than the %d a definition may hold in all",
			largest, largestN, n, MaxTemplateCodeBytes)
	}
	return nil
}

// values lists every templated value of the definition, with its field, in a fixed order.
func (d *Definition) values() []value {
	var vs []value
	add := func(prefix string, m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			vs = append(vs, value{field: fmt.Sprintf("%s[%s]", prefix, k), text: m[k]})
		}
	}
	t := &d.ConfigBundleTemplate
	vs = append(vs, value{field: "spec.template.spec.message", text: t.Spec.Message})
	add("spec.template.spec.data", dataStrings(t.Spec.Data))
	add("spec.template.metadata.labels", t.Metadata.Labels)
	add("spec.template.metadata.annotations", t.Metadata.Annotations)
	for _, o := range d.Overrides {
		prefix := "spec.overrides[" + o.Name + "]"
		if o.Message != nil {
			vs = append(vs, value{field: prefix + ".message", text: *o.Message})
		}
		add(prefix+".data", dataStrings(o.Data))
		add(prefix+".labels", o.Labels)
		add(prefix+".annotations", o.Annotations)
	}
	return vs
}

func dataStrings(m map[string]configbundlev1alpha1.DataValue) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// Render renders the definition for a member: the overrides whose clusterSelector selects it
// applied in order, then, with GoTemplate, every value executed for it and checked (label
// values, sizes). The error (RenderFailed) names the field; Check's errors are returned too.
func (d *Definition) Render(m Member) (Rendered, error) {
	return d.RenderCached(m, "")
}

// RenderCached is Render, the values of the definition whose Hash is hash parsed once for all
// members (parsedValues); "" parses them anew.
func (d *Definition) RenderCached(m Member, hash string) (Rendered, error) {
	merged, err := d.merge(m)
	if err != nil {
		return Rendered{}, err
	}
	if d.TemplateEngine != hubv1alpha1.TemplateEngineGoTemplate {
		return merged.produce(asWritten)
	}
	if hash == "" { // a revision's definition was checked when it became one
		if err := checkCodeBytes(merged.all()); err != nil {
			return Rendered{}, err
		}
	}
	budget, data := newRenderBudget(), templateData{Cluster: m}
	return merged.produce(func(v value, limit int) (string, error) {
		if v.literal {
			return asWritten(v, limit)
		}
		tree, err := parsedValues.parse(hash, v.field, v.text)
		if err != nil {
			return "", err
		}
		return execValue(tree, data, limit, budget)
	})
}

// asWritten produces a value as written, if it fits in limit.
func asWritten(v value, limit int) (string, error) {
	if len(v.text) > limit {
		return "", fmt.Errorf("%s: the value is longer than the %d bytes left for it", v.field, limit)
	}
	return v.text, nil
}

// produce makes the bundle of the merged values, each produced by produce within what its field
// may still hold (so that a member's rendering holds at most a bundle's worth of output), and
// checks it as the member's API server would: the number of data keys, the size of message and
// data (raw, and JSON-escaped as etcd stores them), label values, the size of the annotations.
func (mv *mergedValues) produce(produce func(v value, limit int) (string, error)) (Rendered, error) {
	if len(mv.data) > configbundlev1alpha1.MaxDataKeys {
		return Rendered{}, fmt.Errorf("spec.template.spec.data: %d keys once the overrides are merged, more than the %d a ConfigBundle holds", len(mv.data), configbundlev1alpha1.MaxDataKeys)
	}
	r := Rendered{Spec: mv.spec}
	r.Spec.Message, r.Spec.Data = "", nil
	var err error
	if r.Spec.Message, err = produce(mv.message, configbundlev1alpha1.MaxMessageBytes); err != nil {
		return Rendered{}, err
	}
	size, escaped := len(r.Spec.Message), escapedSize(r.Spec.Message)
	if escaped > configbundlev1alpha1.MaxEscapedMessageBytes {
		return Rendered{}, fmt.Errorf("%s: %d bytes once JSON-escaped, more than the %d a ConfigBundle may hold", mv.message.field, escaped, configbundlev1alpha1.MaxEscapedMessageBytes)
	}
	for _, k := range slices.Sorted(maps.Keys(mv.data)) {
		out, err := produce(mv.data[k], min(configbundlev1alpha1.MaxDataValueBytes, configbundlev1alpha1.MaxMessageBytes-size))
		if err != nil {
			return Rendered{}, err
		}
		size, escaped = size+len(out), escaped+escapedSize(out)
		if escaped > configbundlev1alpha1.MaxEscapedMessageBytes {
			return Rendered{}, fmt.Errorf("%s: message and data are %d bytes once JSON-escaped, more than the %d a ConfigBundle may hold", mv.data[k].field, escaped, configbundlev1alpha1.MaxEscapedMessageBytes)
		}
		if r.Spec.Data == nil {
			r.Spec.Data = make(map[string]configbundlev1alpha1.DataValue, len(mv.data))
		}
		r.Spec.Data[k] = configbundlev1alpha1.DataValue(out)
	}
	if r.Labels, err = produceMap(mv.labels, func(string, int) int { return validation.LabelValueMaxLength }, produce, checkLabelValue); err != nil {
		return Rendered{}, err
	}
	annotationsLeft := func(key string, used int) int { return max(maxAnnotationsBytes-used-len(key), 0) }
	if r.Annotations, err = produceMap(mv.annotations, annotationsLeft, produce, nil); err != nil {
		return Rendered{}, err
	}
	return r, nil
}

// maxAnnotationsBytes is the most bytes of a ConfigBundle's annotations, keys and values.
const maxAnnotationsBytes = 256 * 1024

// produceMap produces the values of m, in the order of their keys, each within limit(key, the
// bytes of keys and values produced before it), and checks each with check.
func produceMap(m map[string]value, limit func(key string, used int) int, produce func(value, int) (string, error), check func(string) error) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out, used := make(map[string]string, len(m)), 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, err := produce(m[k], limit(k, used))
		if err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(s); err != nil {
				return nil, fmt.Errorf("%s: rendered %q: %w", m[k].field, s, err)
			}
		}
		out[k], used = s, used+len(k)+len(s)
	}
	return out, nil
}

// escapedSize is the size of s once JSON-escaped, as the API server stores it in etcd and as the
// ConfigBundle's CEL rules count it: <, >, &, U+2028, U+2029 and control characters other than
// tab, newline and carriage return take 6 bytes, ", \, tab, newline and carriage return 2.
func escapedSize(s string) int {
	n := len(s)
	for _, r := range s {
		switch {
		case r == '<' || r == '>' || r == '&' || (r < 0x20 && r != '\t' && r != '\n' && r != '\r'):
			n += 5
		case r == '\u2028' || r == '\u2029':
			n += 3
		case r == '"' || r == '\\' || r == '\t' || r == '\n' || r == '\r':
			n++
		}
	}
	return n
}

// checkLabelValue returns why a rendered value is not a valid label value.
func checkLabelValue(s string) error {
	if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
		return fmt.Errorf("not a valid label value: %s", strings.Join(errs, "; "))
	}
	return nil
}
