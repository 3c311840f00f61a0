package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/template"
)

// A revision of a FleetBundle whose template has target Secret keeps what its secretRef sources
// held in an immutable hub Secret "<fleetbundle>-<revision>-sources" (template.SnapshotName),
// labelled SourceLabel=SourceSnapshotValue, controller-owned by the revision's
// ControllerRevision: pruned with it. The ControllerRevision holds only their hash
// (Definition.SourcesHash): no secret value is ever in one.

// ensureSnapshot creates the snapshot of revision r, if d, the definition it was made from now,
// holds the values of its Secret sources and the snapshot is not in the hub's cache (c reads
// from it). The values match r's: its hash covers theirs.
func ensureSnapshot(ctx context.Context, c client.Client, fb *hubv1alpha1.FleetBundle, r Revision, d *template.Definition, fieldOwner string) error {
	if d.SecretSources == nil || r.Definition.SourcesHash != d.SourcesHash {
		return nil
	}
	key := client.ObjectKey{Namespace: fb.Namespace, Name: template.SnapshotName(fb.Name, r.Number)}
	switch err := c.Get(ctx, key, &corev1.Secret{}); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the snapshot Secret %s: %w", key.Name, err)
	}
	data := make(map[string][]byte, len(d.SecretSources))
	for k, v := range d.SecretSources {
		data[k] = []byte(v)
	}
	snapshot := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{
				hubv1alpha1.SourceLabel:      hubv1alpha1.SourceSnapshotValue,
				hubv1alpha1.FleetBundleLabel: fleetbundle.LabelValue(client.ObjectKeyFromObject(fb)),
				hubv1alpha1.ManagedByLabel:   fieldOwner,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ControllerRevision", Name: r.Name, UID: r.UID, Controller: ptr.To(true),
			}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      data,
	}
	if err := c.Create(ctx, snapshot, client.FieldOwner(fieldOwner)); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating the snapshot Secret %s: %w", key.Name, err)
	}
	return nil
}

// ReadSnapshot reads the snapshot of revision n of the FleetBundle key from reader: the values
// a placed bundle with target Secret publishes. It returns nil if there is none that revision
// n's ControllerRevision owns.
func ReadSnapshot(ctx context.Context, reader client.Reader, key client.ObjectKey, n int64) (*corev1.Secret, error) {
	snapshot := &corev1.Secret{}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: template.SnapshotName(key.Name, n)}, snapshot); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the snapshot of revision %d: %w", n, err)
	}
	ref := metav1.GetControllerOfNoCopy(snapshot)
	if snapshot.Labels[hubv1alpha1.SourceLabel] != hubv1alpha1.SourceSnapshotValue || ref == nil || ref.Kind != "ControllerRevision" || ref.Name != RevisionName(key.Name, n) {
		return nil, nil
	}
	return snapshot, nil
}

// SnapshotHash is the hash of what a snapshot holds (template.SecretHash).
func SnapshotHash(snapshot *corev1.Secret) string {
	data := make(map[string]string, len(snapshot.Data))
	for k, v := range snapshot.Data {
		data[k] = string(v)
	}
	return template.SecretHash(data)
}

// SecretCacheOptions adds to a hub manager's cache of Secrets, which the provider restricts to
// the members' kubeconfig Secrets of its namespace, the Secrets of every other namespace labelled
// SourceLabel "true" (sources) or SourceSnapshotValue (the hub's snapshots): the hub caches no
// other Secret.
func SecretCacheOptions(opts *cache.Options) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	var key client.Object = &corev1.Secret{}
	for obj := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			key = obj
		}
	}
	byObject := opts.ByObject[key]
	if byObject.Namespaces == nil {
		byObject.Namespaces = map[string]cache.Config{}
	}
	for ns, cfg := range byObject.Namespaces {
		if cfg.LabelSelector == nil {
			cfg.LabelSelector = byObject.Label
			byObject.Namespaces[ns] = cfg
		}
	}
	sources, err := labels.NewRequirement(hubv1alpha1.SourceLabel, selection.In, []string{"true", hubv1alpha1.SourceSnapshotValue})
	if err != nil {
		panic(fmt.Sprintf("the selector of source Secrets: %v", err)) // constant values cannot be invalid
	}
	byObject.Namespaces[cache.AllNamespaces] = cache.Config{LabelSelector: labels.NewSelector().Add(*sources)}
	opts.ByObject[key] = byObject
}
