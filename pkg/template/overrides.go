package template

import (
	"fmt"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// A definition's overrides are applied to its values for one member before anything is rendered:
// each override whose clusterSelector selects the member sets its message, data, labels and
// annotations over the template's, in the order of spec.overrides.

// mergedValues is a definition's values for one member once its overrides are applied: each
// value with the field it came from.
type mergedValues struct {
	// spec is the template's spec: its message and data are the values below, its other fields
	// (immutable, driftPolicy, takeOver) are placed as written.
	spec                      configbundlev1alpha1.ConfigBundleSpec
	message                   value
	data, labels, annotations map[string]value
}

// merge applies the overrides that select the member.
func (d *Definition) merge(m Member) (mergedValues, error) {
	t := &d.ConfigBundleTemplate
	mv := mergedValues{
		spec:        t.Spec,
		message:     value{field: "spec.template.spec.message", text: t.Spec.Message},
		data:        mergeFields(literals(d.Sources), "spec.template.spec.data", dataStrings(t.Spec.Data)),
		labels:      fields("spec.template.metadata.labels", t.Metadata.Labels),
		annotations: fields("spec.template.metadata.annotations", t.Metadata.Annotations),
	}
	for i := range d.Overrides {
		o := &d.Overrides[i]
		ok, err := fleetbundle.Selects(&o.ClusterSelector, m.Labels)
		if err != nil {
			return mergedValues{}, fmt.Errorf("spec.overrides[%s].clusterSelector: %w", o.Name, err)
		}
		if !ok {
			continue
		}
		prefix := "spec.overrides[" + o.Name + "]"
		if o.Message != nil {
			mv.message = value{field: prefix + ".message", text: *o.Message}
		}
		mv.data = mergeFields(mv.data, prefix+".data", dataStrings(o.Data))
		mv.labels = mergeFields(mv.labels, prefix+".labels", o.Labels)
		mv.annotations = mergeFields(mv.annotations, prefix+".annotations", o.Annotations)
	}
	return mv, nil
}

func fields(prefix string, m map[string]string) map[string]value {
	return mergeFields(nil, prefix, m)
}

// mergeFields sets the values of m over into, each named "<prefix>[<key>]".
func mergeFields(into map[string]value, prefix string, m map[string]string) map[string]value {
	if len(m) == 0 {
		return into
	}
	if into == nil {
		into = make(map[string]value, len(m))
	}
	for k, v := range m {
		into[k] = value{field: fmt.Sprintf("%s[%s]", prefix, k), text: v}
	}
	return into
}

// literals are the values of a definition's sources: data, never template code.
func literals(sources map[string]string) map[string]value {
	if len(sources) == 0 {
		return nil
	}
	out := make(map[string]value, len(sources))
	for k, v := range sources {
		out[k] = value{field: fmt.Sprintf("spec.dataFrom[%s]", k), text: v, literal: true}
	}
	return out
}

// all lists the merged values that are templated (the sources' are not).
func (mv *mergedValues) all() []value {
	vs := []value{mv.message}
	for _, m := range []map[string]value{mv.data, mv.labels, mv.annotations} {
		for _, v := range m {
			if !v.literal {
				vs = append(vs, v)
			}
		}
	}
	return vs
}
