package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestHashIsStable: the hash of a template is what it was before the template's metadata
// became omitzero (the template encoded with "metadata":{}), so that a hub upgrade rewrites no
// placed bundle.
func TestHashIsStable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template hubv1alpha1.ConfigBundleTemplate
		encoded  string // as encoding/json encoded ConfigBundleTemplate with metadata omitempty
	}{
		{name: "no metadata", template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello"}},
			encoded: `{"metadata":{},"spec":{"message":"hello","immutable":false}}`},
		{name: "labels", template: hubv1alpha1.ConfigBundleTemplate{
			Metadata: hubv1alpha1.TemplateMetadata{Labels: map[string]string{"b": "2", "a": "1"}},
			Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: "x", Immutable: true}},
			encoded: `{"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"message":"x","immutable":true}}`},
		{name: "empty data", template: hubv1alpha1.ConfigBundleTemplate{
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "x", Data: map[string]configbundlev1alpha1.DataValue{}}},
			encoded: `{"metadata":{},"spec":{"message":"x","immutable":false}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(tc.encoded))
			if got, want := Hash(&Definition{ConfigBundleTemplate: tc.template}), hex.EncodeToString(sum[:8]); got != want {
				t.Errorf("Hash = %s, want %s (the hash of %s)", got, want, tc.encoded)
			}
		})
	}
}

// TestTemplateMetadataOmitted: a FleetBundle without spec.template.metadata encodes without it
// (omitzero), so that the hub's types never add "metadata: {}" to a user's spec.
func TestTemplateMetadataOmitted(t *testing.T) {
	fb := &hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "m"}}}}
	raw, err := json.Marshal(fb.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(raw), `{"spec":{"message":"m","immutable":false}}`; got != want {
		t.Errorf("template encodes as %s, want %s", got, want)
	}
	fb.Spec.Template.Metadata.Labels = map[string]string{"a": "1"}
	if raw, _ := json.Marshal(fb.Spec.Template); !strings.Contains(string(raw), `"metadata":{"labels":{"a":"1"}}`) {
		t.Errorf("template with labels encodes as %s", raw)
	}
}

// TestDefaultDriftPolicyChangesNoHash: a FleetBundle whose template has driftPolicy Heal, the
// default the API server sets, has the hash it had before driftPolicy existed, so that a hub
// upgrade makes no new revision; another policy is a new definition.
func TestDefaultDriftPolicyChangesNoHash(t *testing.T) {
	fb := func(policy configbundlev1alpha1.DriftPolicy) *hubv1alpha1.FleetBundle {
		return &hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{Template: hubv1alpha1.ConfigBundleTemplate{
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello", DriftPolicy: policy}}}}
	}
	hash := func(policy configbundlev1alpha1.DriftPolicy) string {
		d := DefinitionOf(fb(policy))
		return Hash(&d)
	}
	if hash(configbundlev1alpha1.DriftPolicyHeal) != hash("") {
		t.Errorf("driftPolicy Heal changes the hash of a template")
	}
	if hash(configbundlev1alpha1.DriftPolicyReport) == hash("") {
		t.Errorf("driftPolicy Report hashes as Heal")
	}
}

// TestDefaultTakeOverChangesNoHash: as driftPolicy, takeOver Never, the default the API server
// sets, keeps the hash a template had before takeOver existed; another value is a new definition.
func TestDefaultTakeOverChangesNoHash(t *testing.T) {
	hash := func(takeOver configbundlev1alpha1.TakeOver) string {
		d := DefinitionOf(&hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{Template: hubv1alpha1.ConfigBundleTemplate{
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello", TakeOver: takeOver}}}})
		return Hash(&d)
	}
	if hash(configbundlev1alpha1.TakeOverNever) != hash("") {
		t.Errorf("takeOver Never changes the hash of a template")
	}
	if hash(configbundlev1alpha1.TakeOverIfNoDiff) == hash("") {
		t.Errorf("takeOver IfNoDiff hashes as Never")
	}
}

// TestDefaultSecretTypeChangesNoHash: an empty secretType and Opaque, the default, keep the hash
// a template had before secretType existed; another type is a new definition.
func TestDefaultSecretTypeChangesNoHash(t *testing.T) {
	hash := func(secretType configbundlev1alpha1.SecretType) string {
		d := DefinitionOf(&hubv1alpha1.FleetBundle{Spec: hubv1alpha1.FleetBundleSpec{Template: hubv1alpha1.ConfigBundleTemplate{
			Spec: configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, SecretType: secretType}}}})
		return Hash(&d)
	}
	if hash(configbundlev1alpha1.SecretTypeOpaque) != hash("") {
		t.Errorf("secretType Opaque changes the hash of a template")
	}
	if hash(configbundlev1alpha1.SecretTypeDockerConfigJSON) == hash("") {
		t.Errorf("secretType kubernetes.io/dockerconfigjson hashes as Opaque")
	}
}
