package template

import (
	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// Hash identifies a definition's content: the placed bundles carry it in
// FleetBundleTemplateHashAnnotation.
func Hash(d *Definition) string {
	return fleetbundle.Hash(hashedDefinition{Metadata: d.Metadata, Spec: d.Spec, TemplateEngine: d.TemplateEngine, Overrides: d.Overrides,
		DataFrom: d.DataFrom, Sources: d.Sources, SourcesHash: d.SourcesHash})
}

// hashedDefinition is what Hash hashes: a template with its metadata always encoded, as
// ConfigBundleTemplate was before its metadata became omitzero, and templateEngine and overrides
// (and dataFrom and the sources) only when set, so that a hub upgrade changes no hash, and so rewrites no placed bundle.
type hashedDefinition struct {
	Metadata       hubv1alpha1.TemplateMetadata          `json:"metadata"`
	Spec           configbundlev1alpha1.ConfigBundleSpec `json:"spec"`
	TemplateEngine hubv1alpha1.TemplateEngine            `json:"templateEngine,omitempty"`
	Overrides      []hubv1alpha1.TemplateOverride        `json:"overrides,omitempty"`
	DataFrom       []hubv1alpha1.DataFromSource          `json:"dataFrom,omitempty"`
	Sources        map[string]string                     `json:"sources,omitempty"`
	SourcesHash    string                                `json:"sourcesHash,omitempty"`
}
