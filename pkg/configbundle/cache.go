package configbundle

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// ConfigureCache sets the cache options a member cluster needs for this reconciler. Managed
// fields are dropped from every cached object but the ConfigMaps kept whole (trimManagedFields),
// and a ConfigMap that no ConfigBundle controls and
// the hub never wrote is cached as a skeleton (name, namespace, uid, resourceVersion,
// ownerReferences, finalizers): enough to notice a same-named ConfigMap in a bundle's way, and
// nothing of its data. Only the Secrets labelled SecretLabel, those the hub publishes, are
// cached. Options already set for ConfigMaps or Secrets are kept.
func ConfigureCache(opts *cache.Options) {
	if opts.DefaultTransform == nil {
		opts.DefaultTransform = cache.TransformStripManagedFields()
	}
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	hasConfigMaps, hasSecrets := false, false
	for obj := range opts.ByObject {
		switch obj.(type) {
		case *corev1.ConfigMap:
			hasConfigMaps = true
		case *corev1.Secret:
			hasSecrets = true
		}
	}
	if !hasConfigMaps {
		opts.ByObject[&corev1.ConfigMap{}] = cache.ByObject{Transform: StripUnmanagedConfigMap}
	}
	if !hasSecrets {
		opts.ByObject[&corev1.Secret{}] = cache.ByObject{
			Label:     labels.SelectorFromSet(labels.Set{configbundlev1alpha1.SecretLabel: "true"}),
			Transform: trimSecret,
		}
	}
}

// trimSecret is the cache transform of a member's Secrets, which the cache holds only if
// labelled SecretLabel (those the hub publishes): their managed fields trimmed as a managed
// ConfigMap's.
var trimSecret toolscache.TransformFunc = func(obj any) (any, error) {
	if secret, ok := obj.(*corev1.Secret); ok {
		secret.ManagedFields = trimManagedFields(secret.ManagedFields)
	}
	return obj, nil
}

// StripUnmanagedConfigMap is a cache transform: it keeps whole (its managed fields trimmed) a
// ConfigMap that a ConfigBundle controls or that the hub wrote (DefaultFieldOwner manages some of
// its fields: a managed ConfigMap whose ownerReference someone removed, healed then without a
// read), and reduces any other ConfigMap to its skeleton.
var StripUnmanagedConfigMap toolscache.TransformFunc = func(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	if isControlledByBundle(cm) || writtenByHub(cm) {
		cm.ManagedFields = trimManagedFields(cm.ManagedFields)
		return cm, nil
	}
	return &corev1.ConfigMap{
		TypeMeta: cm.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              cm.Name,
			Namespace:         cm.Namespace,
			UID:               cm.UID,
			ResourceVersion:   cm.ResourceVersion,
			DeletionTimestamp: cm.DeletionTimestamp,
			OwnerReferences:   cm.OwnerReferences,
			Finalizers:        cm.Finalizers,
		},
	}, nil
}

// trimManagedFields keeps of each managedFields entry what tells who wrote the ConfigMap and
// when (manager, operation, time, subresource), and the fields of the entries that are not the
// hub's: who changed what (ChangedBy), with no read on the heal path. The hub's own entry, which
// owns every field of a ConfigMap in steady state, keeps no fields.
func trimManagedFields(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(entries) == 0 {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		out[i] = metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, Time: e.Time, Subresource: e.Subresource}
		if e.Manager != DefaultFieldOwner {
			out[i].FieldsType, out[i].FieldsV1 = e.FieldsType, e.FieldsV1
		}
	}
	return out
}

func isControlledByBundle(cm *corev1.ConfigMap) bool {
	ref := metav1.GetControllerOfNoCopy(cm)
	return ref != nil && ref.Kind == "ConfigBundle" && ref.APIVersion == configbundlev1alpha1.GroupVersion.String()
}

// writtenByHub reports whether the hub's field manager (DefaultFieldOwner) manages fields of cm.
func writtenByHub(cm *corev1.ConfigMap) bool {
	return slices.ContainsFunc(cm.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == DefaultFieldOwner })
}

// maybeSkeleton reports whether a cached ConfigMap may be a skeleton (StripUnmanagedConfigMap):
// one without data. A whole ConfigMap without data is taken for one too, and read again.
func maybeSkeleton(cm *corev1.ConfigMap) bool {
	return cm.Data == nil && cm.BinaryData == nil
}
