package placement

import (
	"cmp"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/tenancy"
)

// HubSources is the configbundle.HubSources of the hub: it resolves a member bundle's
// spec.hubSource to the snapshot Secret of the FleetBundle revision it names, only if that
// FleetBundle places exactly this bundle (its namespace and name, placed by that FleetBundle) in
// this member (it selects the member, within its tenancy), with target Secret, and the snapshot's
// content has the hash the bundle names. It reads the hub's cache (hub), and the API server
// (live) only for a snapshot the cache has not seen yet. A bundle written by hand in a member
// never makes the hub copy a hub Secret.
func HubSources(hub, live client.Reader) configbundle.HubSources {
	return func(ctx context.Context, member multicluster.ClusterName, b *configbundlev1alpha1.ConfigBundle) (map[string][]byte, error) {
		src := b.Spec.HubSource
		if src == nil {
			return nil, notFound("target Secret without spec.hubSource: a Secret's data comes only from a FleetBundle that places this bundle")
		}
		key := client.ObjectKey{Namespace: src.Namespace, Name: src.Name}
		if b.Namespace != src.Namespace || b.Name != src.Name {
			return nil, notFound("spec.hubSource names FleetBundle %s, which never places ConfigBundle %s/%s: a FleetBundle places its bundle at its own namespace and name", key, b.Namespace, b.Name)
		}
		fb := &hubv1alpha1.FleetBundle{}
		switch err := hub.Get(ctx, key, fb); {
		case apierrors.IsNotFound(err):
			return nil, notFound("spec.hubSource names FleetBundle %s, which does not exist on the hub", key)
		case err != nil:
			return nil, fmt.Errorf("reading FleetBundle %s: %w", key, err)
		}
		if ok, err := placesBundle(ctx, hub, fb, member, b); err != nil || !ok {
			return nil, cmp.Or(err, notFound("FleetBundle %s does not place this bundle in member %s with target Secret", key, member))
		}
		return snapshotData(ctx, hub, live, fb, src)
	}
}

// placesBundle reports whether fb places b in member, with target Secret.
func placesBundle(ctx context.Context, hub client.Reader, fb *hubv1alpha1.FleetBundle, member multicluster.ClusterName, b *configbundlev1alpha1.ConfigBundle) (bool, error) {
	if fb.Spec.Template.Spec.TargetKind() != configbundlev1alpha1.TargetSecret || OwnershipOf(b, client.ObjectKeyFromObject(fb), fb.UID) != Own {
		return false, nil
	}
	mc := &hubv1alpha1.MemberCluster{}
	switch err := hub.Get(ctx, client.ObjectKey{Name: string(member)}, mc); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading MemberCluster %s: %w", member, err)
	}
	boundary, err := tenancy.ReadBoundary(ctx, hub, fb)
	if err != nil {
		return false, err
	}
	return places(fb, mc, boundary), nil
}

// snapshotData reads the snapshot src names: revision src.revision of fb, whose content has the
// hash src.hash.
func snapshotData(ctx context.Context, hub, live client.Reader, fb *hubv1alpha1.FleetBundle, src *configbundlev1alpha1.HubSource) (map[string][]byte, error) {
	key := client.ObjectKeyFromObject(fb)
	rev, err := rollout.ReadRevision(ctx, hub, fb, src.Revision)
	if apierrors.IsNotFound(err) {
		rev, err = rollout.ReadRevision(ctx, live, fb, src.Revision)
	}
	if err != nil {
		return nil, notFound("FleetBundle %s has no revision %d", key, src.Revision)
	}
	snapshot, err := rollout.ReadSnapshot(ctx, hub, key, src.Revision)
	if err == nil && snapshot == nil {
		snapshot, err = rollout.ReadSnapshot(ctx, live, key, src.Revision)
	}
	switch {
	case err != nil:
		return nil, err
	case snapshot == nil || !metav1.IsControlledBy(snapshot, &metav1.ObjectMeta{UID: rev.UID}):
		return nil, notFound("FleetBundle %s keeps no snapshot of revision %d", key, src.Revision)
	case rollout.SnapshotHash(snapshot) != src.Hash || rev.Definition.SourcesHash != src.Hash:
		return nil, notFound("the snapshot of revision %d of FleetBundle %s does not have the hash spec.hubSource names", src.Revision, key)
	}
	return snapshot.Data, nil
}

// notFound is an error of HubSources that makes the bundle SourceNotFound.
func notFound(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, configbundle.ErrSourceNotFound)...)
}
