package placement

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
)

// selectorError returns why a FleetBundle's selector is invalid, or nil.
func selectorError(selector *metav1.LabelSelector) error {
	_, err := fleetbundle.Selects(selector, nil)
	return err
}

// specError returns why nothing of a FleetBundle can be placed, removed or changed in any member
// (InvalidSelector, InvalidTemplate), or nil.
func specError(fb *hubv1alpha1.FleetBundle) error {
	if err := selectorError(fb.Spec.ClusterSelector); err != nil {
		return err
	}
	return templateError(fb)
}

// templateError returns why a FleetBundle's definition renders for no member (InvalidTemplate),
// or nil: Definition.Check, once per generation of the FleetBundle (definitionChecks), not once
// per member and status computation.
func templateError(fb *hubv1alpha1.FleetBundle) error {
	key := checkKey{uid: fb.UID, generation: fb.Generation}
	if fb.UID == "" || fb.Generation == 0 { // not read from an API server: nothing identifies its spec
		d := template.DefinitionOf(fb)
		return d.Check()
	}
	definitionChecks.mu.Lock()
	err, ok := definitionChecks.errs[key]
	definitionChecks.mu.Unlock()
	if ok {
		return err
	}
	d := template.DefinitionOf(fb)
	err = d.Check()
	definitionChecks.mu.Lock()
	defer definitionChecks.mu.Unlock()
	if len(definitionChecks.errs) >= maxDefinitionChecks {
		clear(definitionChecks.errs)
	}
	definitionChecks.errs[key] = err
	return err
}

// definitionChecks holds the outcome of Definition.Check by FleetBundle uid and generation (the
// generation changes with the spec), emptied when it holds maxDefinitionChecks.
var definitionChecks = struct {
	mu   sync.Mutex
	errs map[checkKey]error
}{errs: map[checkKey]error{}}

// maxDefinitionChecks bounds definitionChecks.
const maxDefinitionChecks = 4096

// checkKey identifies a FleetBundle's spec.
type checkKey struct {
	uid        types.UID
	generation int64
}

// Desired renders the ConfigBundle a FleetBundle places in a member from its spec, without a
// revision (DesiredOf).
func Desired(fb *hubv1alpha1.FleetBundle, m template.Member) (*configbundlev1alpha1.ConfigBundle, error) {
	d := template.DefinitionOf(fb)
	return DesiredOf(fb, rollout.Revision{Definition: d, Hash: template.Hash(&d)}, m)
}

// DesiredOf renders the ConfigBundle a FleetBundle places in a member from one of its revisions
// (Definition.Render): its name and namespace, the rendered labels plus FleetBundleLabel, the
// rendered annotations plus FleetBundleUIDAnnotation, FleetBundleTemplateHashAnnotation, (for a
// numbered revision) FleetBundleRevisionAnnotation and (for a definition rendered per member)
// FleetBundleRenderHashAnnotation, and the rendered spec. The hub's label and annotations win
// over a template's of the same key. The error is the member's RenderFailed.
func DesiredOf(fb *hubv1alpha1.FleetBundle, r rollout.Revision, m template.Member) (*configbundlev1alpha1.ConfigBundle, error) {
	rendered, err := r.Definition.RenderCached(m, r.Hash)
	if err != nil {
		return nil, err
	}
	renderHash := ""
	if r.Definition.PerMember() {
		renderHash = fleetbundle.Hash(rendered) // of the rendering alone, before the hub's label and annotations join it
	}
	lbls := rendered.Labels
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[hubv1alpha1.FleetBundleLabel] = fleetbundle.LabelValue(types.NamespacedName{Namespace: fb.Namespace, Name: fb.Name})
	annotations := rendered.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, hubs := range []string{hubv1alpha1.FleetBundleRevisionAnnotation, hubv1alpha1.FleetBundleRenderHashAnnotation} {
		delete(annotations, hubs)
	}
	if renderHash != "" {
		annotations[hubv1alpha1.FleetBundleRenderHashAnnotation] = renderHash
	}
	delete(annotations, hubv1alpha1.DeletionPolicyAnnotation)
	if fb.Spec.DeletionPolicy == hubv1alpha1.DeletionPolicyOrphan {
		annotations[hubv1alpha1.DeletionPolicyAnnotation] = string(hubv1alpha1.DeletionPolicyOrphan)
	}
	annotations[hubv1alpha1.FleetBundleUIDAnnotation] = string(fb.UID)
	annotations[hubv1alpha1.FleetBundleTemplateHashAnnotation] = r.Hash
	if r.Number > 0 {
		annotations[hubv1alpha1.FleetBundleRevisionAnnotation] = strconv.FormatInt(r.Number, 10)
	}
	spec := rendered.Spec
	if spec.TargetKind() == configbundlev1alpha1.TargetSecret && r.Number > 0 {
		// The values stay on the hub: the bundle names the revision's snapshot.
		spec.HubSource = &configbundlev1alpha1.HubSource{Namespace: fb.Namespace, Name: fb.Name, Revision: r.Number, Hash: r.Definition.SourcesHash}
	}
	return &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Name: fb.Name, Namespace: fb.Namespace, Labels: lbls, Annotations: annotations},
		Spec:       spec,
	}, nil
}

// Ownership is what the hub makes of a ConfigBundle found where a FleetBundle places its own.
type Ownership string

const (
	// Absent: there is no ConfigBundle.
	Absent Ownership = "absent"
	// Foreign: the hub did not place it (no FleetBundleLabel naming this FleetBundle, or no
	// FleetBundleUIDAnnotation). It is never changed.
	Foreign Ownership = "foreign"
	// Stale: an earlier FleetBundle of the same namespace and name placed it (another uid); that
	// FleetBundle is gone, so the bundle is removed.
	Stale Ownership = "stale"
	// Own: this FleetBundle placed it.
	Own Ownership = "own"
)

// OwnershipOf classifies b, found at the place of the FleetBundle fb of uid uid.
func OwnershipOf(b *configbundlev1alpha1.ConfigBundle, fb types.NamespacedName, uid types.UID) Ownership {
	switch {
	case b == nil:
		return Absent
	case b.Labels[hubv1alpha1.FleetBundleLabel] != fleetbundle.LabelValue(fb) || b.Annotations[hubv1alpha1.FleetBundleUIDAnnotation] == "":
		return Foreign
	case types.UID(b.Annotations[hubv1alpha1.FleetBundleUIDAnnotation]) != uid:
		return Stale
	}
	return Own
}

// Drift lists what of a placed bundle differs from the desired one: "spec", "labels",
// "annotations"; none if it is as desired.
func Drift(desired, current *configbundlev1alpha1.ConfigBundle) []string {
	var out []string
	if !current.Spec.Equal(desired.Spec) || current.Spec.Policy() != desired.Spec.Policy() || current.Spec.TakeOverPolicy() != desired.Spec.TakeOverPolicy() {
		out = append(out, "spec")
	}
	if !equality.Semantic.DeepEqual(nonEmpty(current.Labels), nonEmpty(desired.Labels)) {
		out = append(out, "labels")
	}
	if !equality.Semantic.DeepEqual(nonEmpty(current.Annotations), nonEmpty(desired.Annotations)) {
		out = append(out, "annotations")
	}
	return out
}

// nonEmpty is m, or an empty map for nil, so that nil and empty compare equal.
func nonEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
