package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/template"
)

func fleetBundle(message string) *hubv1alpha1.FleetBundle {
	return &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-1", Generation: 3},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: &metav1.LabelSelector{},
			Template: hubv1alpha1.ConfigBundleTemplate{
				Metadata: hubv1alpha1.TemplateMetadata{
					Labels:      map[string]string{"app": "web", hubv1alpha1.FleetBundleLabel: "forged"},
					Annotations: map[string]string{"owner": "team"},
				},
				Spec: configbundlev1alpha1.ConfigBundleSpec{Message: message},
			},
		},
	}
}

func TestDesired(t *testing.T) {
	fb := fleetBundle("hello")
	got, err := Desired(fb, template.Member{Name: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	def := template.DefinitionOf(fb)
	want := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: "web",
			Labels: map[string]string{"app": "web", hubv1alpha1.FleetBundleLabel: "team.web"},
			Annotations: map[string]string{"owner": "team", hubv1alpha1.FleetBundleUIDAnnotation: "uid-1",
				hubv1alpha1.FleetBundleTemplateHashAnnotation: template.Hash(&def)},
		},
		Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Desired (-want +got):\n%s", diff)
	}
	if fb.Spec.Template.Metadata.Labels[hubv1alpha1.FleetBundleLabel] != "forged" {
		t.Errorf("Desired changed the FleetBundle's template")
	}
	hash := func(fb *hubv1alpha1.FleetBundle) string {
		d := template.DefinitionOf(fb)
		return template.Hash(&d)
	}
	if hash(fb) == hash(fleetBundle("other")) {
		t.Errorf("two templates have the same hash")
	}
	fb.Spec.ClusterSelector = nil
	if hash(fb) != hash(fleetBundle("hello")) {
		t.Errorf("the selector changed the template's hash")
	}
	fb.Spec.TemplateEngine = hubv1alpha1.TemplateEngineNone
	if hash(fb) != hash(fleetBundle("hello")) {
		t.Errorf("templateEngine None changed the template's hash")
	}
	fb.Spec.TemplateEngine = hubv1alpha1.TemplateEngineGoTemplate
	if hash(fb) == hash(fleetBundle("hello")) {
		t.Errorf("templateEngine GoTemplate did not change the template's hash")
	}
	fb.Spec.TemplateEngine = ""
	fb.Spec.Overrides = []hubv1alpha1.TemplateOverride{{Name: "dev", ClusterSelector: metav1.LabelSelector{}}}
	if hash(fb) == hash(fleetBundle("hello")) {
		t.Errorf("an override did not change the template's hash")
	}
}

func TestOwnershipAndDrift(t *testing.T) {
	fb := fleetBundle("hello")
	key := types.NamespacedName{Namespace: "team", Name: "web"}
	desired, err := Desired(fb, template.Member{Name: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b *configbundlev1alpha1.ConfigBundle)) *configbundlev1alpha1.ConfigBundle {
		b := desired.DeepCopy()
		f(b)
		return b
	}
	for _, tc := range []struct {
		name      string
		bundle    *configbundlev1alpha1.ConfigBundle
		ownership Ownership
		drift     []string
	}{
		{name: "absent", bundle: nil, ownership: Absent},
		{name: "as desired", bundle: desired, ownership: Own},
		{name: "foreign: no label", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { delete(b.Labels, hubv1alpha1.FleetBundleLabel) }), ownership: Foreign},
		{name: "foreign: no uid", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) {
			delete(b.Annotations, hubv1alpha1.FleetBundleUIDAnnotation)
		}), ownership: Foreign},
		{name: "foreign: another FleetBundle's label", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { b.Labels[hubv1alpha1.FleetBundleLabel] = "other.web" }), ownership: Foreign},
		{name: "stale: an earlier FleetBundle's", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Annotations[hubv1alpha1.FleetBundleUIDAnnotation] = "uid-0"
		}), ownership: Stale},
		{name: "edited spec", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "edited" }), ownership: Own, drift: []string{"spec"}},
		{name: "driftPolicy changed", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyReport
		}), ownership: Own, drift: []string{"spec"}},
		{name: "driftPolicy defaulted", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyHeal }), ownership: Own},
		{name: "edited takeOver", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.TakeOver = configbundlev1alpha1.TakeOverAlways }),
			ownership: Own, drift: []string{"spec"}},
		{name: "takeOver defaulted", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.TakeOver = configbundlev1alpha1.TakeOverNever }), ownership: Own},
		{name: "label added", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { b.Labels["x"] = "y" }), ownership: Own, drift: []string{"labels"}},
		{name: "annotation removed", bundle: edit(func(b *configbundlev1alpha1.ConfigBundle) { delete(b.Annotations, "owner") }), ownership: Own, drift: []string{"annotations"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OwnershipOf(tc.bundle, key, fb.UID); got != tc.ownership {
				t.Errorf("OwnershipOf = %s, want %s", got, tc.ownership)
			}
			if tc.ownership != Own {
				return // drift is only looked at in the hub's own bundles
			}
			if diff := cmp.Diff(tc.drift, Drift(desired, tc.bundle)); diff != "" {
				t.Errorf("Drift (-want +got):\n%s", diff)
			}
		})
	}
}
