package configbundle

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// lastAppliedAnnotation is kubectl's client-side apply record. It describes the bundle, not the
// ConfigMap, so it is the one annotation not propagated.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Names of the parts of a ConfigMap that Drift compares, as they appear in Events and logs.
const (
	DriftNamespace       = "namespace"
	DriftLabels          = "labels"
	DriftAnnotations     = "annotations"
	DriftOwnerReferences = "ownerReferences"
	DriftData            = "data"
	DriftBinaryData      = "binaryData"
	DriftImmutable       = "immutable"
	// DriftType: the Secret of a bundle with target Secret is not of its spec.secretType.
	DriftType = "type"
	// DriftDeleted is reported when the managed ConfigMap was deleted and had to be recreated.
	DriftDeleted = "deleted"
)

// DesiredConfigMap renders the ConfigMap a bundle asks for: the bundle's name and namespace, its
// data and its message as data.message, its immutability, its labels exactly (and GuardLabel
// with driftPolicy Guard), its annotations but kubectl's last-applied record, and one
// ownerReference naming the bundle as controller.
func DesiredConfigMap(bundle *configbundlev1alpha1.ConfigBundle) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            bundle.Name,
			Namespace:       bundle.Namespace,
			Labels:          configMapLabels(bundle),
			Annotations:     propagatedAnnotations(bundle.Annotations),
			OwnerReferences: []metav1.OwnerReference{controllerReference(bundle)},
		},
		Data:      configMapData(bundle.Spec),
		Immutable: ptr.To(bundle.Spec.Immutable),
	}
}

// configMapData is the data of the ConfigMap of a spec: its data, and its message as
// data.message (admission refuses a data key "message"; the message would win).
func configMapData(spec configbundlev1alpha1.ConfigBundleSpec) map[string]string {
	data := make(map[string]string, len(spec.Data)+1)
	for k, v := range spec.Data {
		data[k] = string(v)
	}
	data[configbundlev1alpha1.MessageKey] = spec.Message
	return data
}

// configMapLabels are the bundle's labels, and GuardLabel with driftPolicy Guard (it wins over
// a bundle label of the same key).
func configMapLabels(bundle *configbundlev1alpha1.ConfigBundle) map[string]string {
	labels := maps.Clone(bundle.Labels)
	if bundle.Spec.Policy() == configbundlev1alpha1.DriftPolicyGuard {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[configbundlev1alpha1.GuardLabel] = "true"
	}
	return labels
}

func propagatedAnnotations(in map[string]string) map[string]string {
	out := maps.Clone(in)
	delete(out, lastAppliedAnnotation)
	if len(out) == 0 {
		return nil
	}
	return out
}

func controllerReference(bundle *configbundlev1alpha1.ConfigBundle) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         configbundlev1alpha1.GroupVersion.String(),
		Kind:               "ConfigBundle",
		Name:               bundle.Name,
		UID:                bundle.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// Drift lists, in a fixed order, the parts of actual that differ from desired: namespace,
// labels, annotations, ownerReferences, data, binaryData, immutable and, for the view of a
// Secret, its type. Empty and missing maps
// are equal; any binaryData is drift, as is any data key the bundle does not set.
func Drift(desired, actual *corev1.ConfigMap) []string {
	var drift []string
	if actual.Namespace != desired.Namespace {
		drift = append(drift, DriftNamespace)
	}
	if !maps.Equal(actual.Labels, desired.Labels) {
		drift = append(drift, DriftLabels)
	}
	if !equalAnnotations(actual.Annotations, desired.Annotations) {
		drift = append(drift, DriftAnnotations)
	}
	if !slices.EqualFunc(actual.OwnerReferences, desired.OwnerReferences, equalOwnerReference) {
		drift = append(drift, DriftOwnerReferences)
	}
	if !maps.Equal(actual.Data, desired.Data) {
		drift = append(drift, DriftData)
	}
	if len(actual.BinaryData) > 0 {
		drift = append(drift, DriftBinaryData)
	}
	if ptr.Deref(actual.Immutable, false) != ptr.Deref(desired.Immutable, false) {
		drift = append(drift, DriftImmutable)
	}
	if viewType(actual) != viewType(desired) {
		drift = append(drift, DriftType)
	}
	return drift
}

// DriftFields names, for users, what differs in actual from desired, in a fixed order: each data
// key added, removed or changed ("data.KEY added"), then labels, annotations, ownerReferences,
// binaryData and immutable as Drift names them; at most
// configbundlev1alpha1.MaxDriftFields entries, the last saying how many more differ.
func DriftFields(desired, actual *corev1.ConfigMap) []string {
	var fields []string
	keys := slices.Sorted(maps.Keys(actual.Data))
	for k := range desired.Data {
		if _, ok := actual.Data[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		want, wanted := desired.Data[k]
		got, present := actual.Data[k]
		switch {
		case !wanted:
			fields = append(fields, "data."+k+" added")
		case !present:
			fields = append(fields, "data."+k+" removed")
		case want != got:
			fields = append(fields, "data."+k+" changed")
		}
	}
	for _, d := range Drift(desired, actual) {
		if d != DriftData {
			fields = append(fields, d)
		}
	}
	if n := configbundlev1alpha1.MaxDriftFields; len(fields) > n {
		fields = append(fields[:n-1], fmt.Sprintf("and %d more", len(fields)-n+1))
	}
	return fields
}

func equalOwnerReference(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false) &&
		ptr.Deref(a.BlockOwnerDeletion, false) == ptr.Deref(b.BlockOwnerDeletion, false)
}

// contentDrift reports whether drift touches what an immutable ConfigMap can no longer change.
// (A Secret's type, which no Secret can change, is replaced whether it is immutable or not.)
func contentDrift(drift []string) bool {
	return slices.ContainsFunc(drift, func(d string) bool {
		return d == DriftData || d == DriftBinaryData || d == DriftImmutable
	})
}

// specFromConfigMap reads back the spec an immutable ConfigMap was made from.
func specFromConfigMap(cm *corev1.ConfigMap) configbundlev1alpha1.ConfigBundleSpec {
	spec := configbundlev1alpha1.ConfigBundleSpec{
		Message:   cm.Data[configbundlev1alpha1.MessageKey],
		Immutable: ptr.Deref(cm.Immutable, false),
	}
	for k, v := range cm.Data {
		if k == configbundlev1alpha1.MessageKey {
			continue
		}
		if spec.Data == nil {
			spec.Data = make(map[string]configbundlev1alpha1.DataValue, len(cm.Data)-1)
		}
		spec.Data[k] = configbundlev1alpha1.DataValue(v)
	}
	return spec
}

// ownedBy reports whether cm is the bundle's: it names the bundle as its controller, or it is
// the very ConfigMap (same uid) the bundle's status records.
func ownedBy(bundle *configbundlev1alpha1.ConfigBundle, cm *corev1.ConfigMap) bool {
	if ref := metav1.GetControllerOfNoCopy(cm); ref != nil && ref.UID == bundle.UID {
		return true
	}
	ref := managedRef(bundle)
	return ref != nil && ref.UID == cm.UID
}
