package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/template"
)

// ResolveDefinition is the definition a FleetBundle's spec gives, with what its spec.dataFrom
// sources hold, read through reader (template.ResolveSources). Only ConfigMaps labelled
// SourceLabel are read, whatever reader holds. With spec.dataFromRevision, the copy of the
// sources that revision keeps is used instead while the sources resolve to sourcesHash or cannot
// be resolved (and the revision is kept, with the same dataFrom). A *template.SourceError says
// why the sources cannot be resolved (SourceNotFound, SourceInvalid, InvalidTemplate).
func ResolveDefinition(ctx context.Context, reader client.Reader, fb *hubv1alpha1.FleetBundle) (template.Definition, error) {
	d := template.DefinitionOf(fb)
	if len(fb.Spec.DataFrom) == 0 {
		return d, nil
	}
	sources, err := ReadSources(ctx, reader, fb)
	if err != nil && !errors.As(err, new(*template.SourceError)) {
		return d, err
	}
	secret := fb.Spec.Template.Spec.TargetKind() == configbundlev1alpha1.TargetSecret
	if pin := fb.Spec.DataFromRevision; pin != nil && (err != nil || template.PinHash(secret, sources) == pin.SourcesHash) {
		rev, perr := ReadRevision(ctx, reader, fb, pin.Revision)
		if perr == nil && equality.Semantic.DeepEqual(rev.Definition.DataFrom, fb.Spec.DataFrom) {
			d.Sources, d.SourcesHash = rev.Definition.Sources, rev.Definition.SourcesHash
			return d, nil
		}
	}
	if err != nil {
		return d, err
	}
	if secret {
		d.SecretSources, d.SourcesHash = sources, template.SecretHash(sources)
		return d, nil
	}
	d.Sources = sources
	return d, nil
}

// ReadSources resolves what a FleetBundle's spec.dataFrom sources hold now, read through reader
// (template.ResolveSources): only ConfigMaps labelled SourceLabel are read, whatever reader
// holds. A *template.SourceError says why they cannot be resolved.
func ReadSources(ctx context.Context, reader client.Reader, fb *hubv1alpha1.FleetBundle) (map[string]string, error) {
	var readErr error
	sources, err := template.ResolveSources(fb, func(e hubv1alpha1.DataFromSource) *template.Source {
		if e.SecretRef != nil {
			src, err := readSecretSource(ctx, reader, fb.Namespace, e.SecretRef.Name)
			readErr = cmp.Or(readErr, err)
			return src
		}
		if e.ConfigMapRef == nil {
			return &template.Source{} // refused by ResolveSources
		}
		cm := &corev1.ConfigMap{}
		switch err := reader.Get(ctx, client.ObjectKey{Namespace: fb.Namespace, Name: e.ConfigMapRef.Name}, cm); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			readErr = err
			return nil
		case cm.Labels[hubv1alpha1.SourceLabel] != "true":
			return nil
		}
		return &template.Source{Data: cm.Data, BinaryKeys: slices.Sorted(maps.Keys(cm.BinaryData))}
	})
	if readErr != nil {
		return nil, fmt.Errorf("reading the sources of FleetBundle %s/%s: %w", fb.Namespace, fb.Name, readErr)
	}
	return sources, err
}

// readSecretSource reads a source Secret: nil if it is missing or not labelled SourceLabel=true.
// Its values are held only as long as resolution needs them.
func readSecretSource(ctx context.Context, reader client.Reader, namespace, name string) (*template.Source, error) {
	secret := &corev1.Secret{}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case secret.Labels[hubv1alpha1.SourceLabel] != "true":
		return nil, nil
	}
	data := make(map[string]string, len(secret.Data))
	for k, v := range secret.Data {
		data[k] = string(v)
	}
	return &template.Source{Data: data}, nil
}

// SourceCacheOptions restricts a hub manager's cache of ConfigMaps to those labelled
// SourceLabel=true: the hub reads no other ConfigMap.
func SourceCacheOptions(opts *cache.Options) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&corev1.ConfigMap{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{hubv1alpha1.SourceLabel: "true"})}
}
