package configbundle

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// A bundle with target Secret publishes a Secret of its spec.secretType through the very path a
// ConfigMap takes: the reconciler converges a ConfigMap view of the Secret (asConfigMap: its
// values as data, a type other than Opaque as the annotation viewTypeKey), and reads and writes
// the Secret itself (the scope's get, create, update and remove). A Secret's type cannot change:
// a type that differs is drift DriftType, which only a replacement mends.
// The Secret's data is not the bundle's, which holds no value: it is what Options.HubSources
// resolves the bundle's spec.hubSource to, read from the hub's cache on every reconcile (no API
// request). Heals, Events and logs name keys, never values.

// viewTypeKey holds, in a view's annotations, the type of the Secret it stands for when that is
// not Opaque. It is no qualified name, so no object's own annotation can be mistaken for it.
const viewTypeKey = "secret type"

// ErrSourceNotFound marks an error of Options.HubSources that no retry mends: the bundle is
// Ready=False, SourceNotFound, with the error as its message, and no Secret is written.
var ErrSourceNotFound = errors.New("the hub writes no Secret for it")

// resolveSecret resolves the data of a bundle with target Secret into s.secretData. It reports
// whether the reconcile ends here: the source is not found (Ready=False, SourceNotFound), or
// resolving failed (the error, retried).
func (s *scope) resolveSecret(ctx context.Context) (bool, error) {
	if s.hubSources == nil {
		s.setReady(metav1.ConditionFalse, configbundlev1alpha1.SourceNotFoundReason,
			"target Secret: this hub resolves no spec.hubSource: "+ErrSourceNotFound.Error())
		return true, nil
	}
	data, err := s.hubSources(ctx, s.req.ClusterName, s.bundle)
	switch {
	case errors.Is(err, ErrSourceNotFound):
		s.setReady(metav1.ConditionFalse, configbundlev1alpha1.SourceNotFoundReason, err.Error())
		return true, nil
	case err != nil:
		return true, fmt.Errorf("resolving spec.hubSource: %w", err)
	}
	s.secretData = data
	return false, nil
}

// desired is the object the bundle asks for, as a ConfigMap: DesiredConfigMap, or with target
// Secret the view of DesiredSecret with the resolved data.
func (s *scope) desired() *corev1.ConfigMap {
	if !s.secret {
		return DesiredConfigMap(s.bundle)
	}
	return asConfigMap(DesiredSecret(s.bundle, s.secretData))
}

// DesiredSecret renders the Secret a bundle with target Secret asks for, holding data: the
// metadata of DesiredConfigMap and SecretLabel, its immutability, its spec.secretType (Opaque by
// default).
func DesiredSecret(bundle *configbundlev1alpha1.ConfigBundle, data map[string][]byte) *corev1.Secret {
	cm := DesiredConfigMap(bundle)
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[configbundlev1alpha1.SecretLabel] = "true"
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: cm.ObjectMeta, Immutable: cm.Immutable,
		Type: corev1.SecretType(bundle.Spec.TypeOfSecret())}
	if data != nil {
		secret.Data = make(map[string][]byte, len(data))
		for k, v := range data {
			secret.Data[k] = v
		}
	}
	return secret
}

// asConfigMap is the ConfigMap view of a Secret: its metadata, immutability and values, and its
// type unless Opaque (viewTypeKey).
func asConfigMap(secret *corev1.Secret) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: secret.ObjectMeta, Immutable: secret.Immutable}
	if secret.Type != "" && secret.Type != corev1.SecretTypeOpaque {
		cm.Annotations = maps.Clone(cm.Annotations)
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[viewTypeKey] = string(secret.Type)
	}
	if secret.Data != nil {
		cm.Data = make(map[string]string, len(secret.Data))
		for k, v := range secret.Data {
			cm.Data[k] = string(v)
		}
	}
	return cm
}

// asSecret is the Secret of a ConfigMap view.
func asSecret(cm *corev1.ConfigMap) *corev1.Secret {
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: *cm.ObjectMeta.DeepCopy(),
		Immutable: cm.Immutable, Type: viewType(cm)}
	delete(secret.Annotations, viewTypeKey)
	if len(secret.Annotations) == 0 {
		secret.Annotations = nil
	}
	if cm.Data != nil {
		secret.Data = make(map[string][]byte, len(cm.Data))
		for k, v := range cm.Data {
			secret.Data[k] = []byte(v)
		}
	}
	return secret
}

// viewType is the type of the Secret a view stands for: Opaque unless viewTypeKey says otherwise.
func viewType(view *corev1.ConfigMap) corev1.SecretType {
	if t := view.Annotations[viewTypeKey]; t != "" {
		return corev1.SecretType(t)
	}
	return corev1.SecretTypeOpaque
}

// equalAnnotations reports whether two views have the same annotations, viewTypeKey aside (Drift
// compares the type on its own).
func equalAnnotations(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if k == viewTypeKey {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
		n++
	}
	for k := range b {
		if k != viewTypeKey {
			n--
		}
	}
	return n == 0
}

// object is the object of the bundle's target that view stands for.
func (s *scope) object(view *corev1.ConfigMap) client.Object {
	if s.secret {
		return asSecret(view)
	}
	return view
}

// viewOf is the view of obj, read into s.emptyObject.
func viewOf(obj client.Object) *corev1.ConfigMap {
	if secret, ok := obj.(*corev1.Secret); ok {
		return asConfigMap(secret)
	}
	return obj.(*corev1.ConfigMap)
}

func (s *scope) emptyObject() client.Object {
	if s.secret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

// get reads the bundle's object with reader, as a view.
func (s *scope) get(ctx context.Context, reader client.Reader, key client.ObjectKey) (*corev1.ConfigMap, error) {
	obj := s.emptyObject()
	if err := reader.Get(ctx, key, obj); err != nil {
		return nil, err
	}
	return viewOf(obj), nil
}

// createObject creates the object view stands for, and updates view with what the API server
// answered.
func (s *scope) createObject(ctx context.Context, view *corev1.ConfigMap) error {
	obj := s.object(view)
	if err := s.member.GetClient().Create(ctx, obj, client.FieldOwner(s.fieldOwner)); err != nil {
		return err
	}
	*view = *viewOf(obj)
	return nil
}

// updateObject updates the object view stands for, and view with what the API server answered.
func (s *scope) updateObject(ctx context.Context, view *corev1.ConfigMap) error {
	obj := s.object(view)
	if err := s.member.GetClient().Update(ctx, obj, client.FieldOwner(s.fieldOwner)); err != nil {
		return err
	}
	*view = *viewOf(obj)
	return nil
}

// kind names the bundle's target kind: "ConfigMap" or "Secret".
func (s *scope) kind() string {
	return string(s.bundle.Spec.TargetKind())
}

// named names an object of the bundle's target in messages: "Secret ns/name".
func (s *scope) named(obj client.Object) string {
	return s.kind() + " " + objectName(obj)
}

// invalidReason is the Ready reason of a write the API server rejects as invalid.
func (s *scope) invalidReason() string {
	if s.secret {
		return configbundlev1alpha1.InvalidSecretReason
	}
	return configbundlev1alpha1.InvalidConfigMapReason
}

// conflictReason is the Ready reason of an object of the bundle's name that it does not own.
func (s *scope) conflictReason() string {
	if s.secret {
		return configbundlev1alpha1.SecretConflictReason
	}
	return configbundlev1alpha1.ConfigMapConflictReason
}

// managedRef is the status's reference to the bundle's object: secretRef with target Secret,
// configMapRef otherwise.
func managedRef(bundle *configbundlev1alpha1.ConfigBundle) *configbundlev1alpha1.ConfigMapReference {
	if bundle.Spec.TargetKind() == configbundlev1alpha1.TargetSecret {
		return bundle.Status.SecretRef
	}
	return bundle.Status.ConfigMapRef
}
