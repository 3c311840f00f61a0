package configbundle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Who wrote a ConfigMap: the hub (a change of the bundle to follow) or someone else (drift to
// heal). The ledger knows the hub's writes since it started, the bundle's status the ConfigMap it
// last published, and the ConfigMap's managedFields the rest, after a restart.

// published reports whether cm is exactly a ConfigMap the hub published for the bundle: the
// status records it, or the reconciler remembers writing it (the status, or the cached copy of
// it, may not record that write yet).
func (s *scope) published(cm *corev1.ConfigMap) bool {
	if s.ledger.isOwnWrite(s.req, cm.ResourceVersion) {
		return true
	}
	ref := managedRef(s.bundle)
	return ref != nil && ref.UID == cm.UID && ref.ResourceVersion == cm.ResourceVersion
}

// hadPublished reports whether the hub is known to have published a ConfigMap for the bundle.
func (s *scope) hadPublished() bool {
	return managedRef(s.bundle) != nil || s.ledger.wrote(s.req)
}

// changedByOthers reports whether cm was written by someone else since the hub published it:
// then a difference is drift to heal, not a change of the bundle to follow. Where nothing says
// the hub published a ConfigMap, nobody can say who wrote it, and nothing is counted as a heal.
func (s *scope) changedByOthers(ctx context.Context, cm *corev1.ConfigMap) (bool, error) {
	if !s.hadPublished() || s.published(cm) {
		return false, nil
	}
	// The ledger knows the hub's last write, when there was one since the hub started; without
	// it, the ConfigMap's managedFields tell. The cache strips them (cache.go), so a cached
	// ConfigMap is read again from the API server: a hub restarted after its ConfigMap write and
	// before the status write that records it would otherwise take its own write for drift.
	if s.ledger.wrote(s.req) {
		return true, nil
	}
	if cm.ManagedFields == nil {
		live, err := s.liveConfigMap(ctx, client.ObjectKeyFromObject(cm))
		if err != nil || live == nil {
			return false, err // gone: the write that follows fails, and the bundle converges again
		}
		cm = live
	}
	return !s.writtenLastByHub(cm), nil
}

// writtenLastByHub reports whether the hub's field manager made the latest write of cm, as its
// managedFields record it (to the second; a tie with another manager is not the hub's). It
// covers what the ledger and status cannot: a hub killed between its ConfigMap write and the
// status write that records it has, once restarted, neither. It is asked only then: a write that
// only removes fields may leave no managedFields entry of its own.
func (s *scope) writtenLastByHub(cm *corev1.ConfigMap) bool {
	var last time.Time
	hub := false
	for _, f := range cm.ManagedFields {
		if f.Time == nil {
			continue
		}
		switch t := f.Time.Time; {
		case t.After(last):
			last, hub = t, f.Manager == s.fieldOwner
		case t.Equal(last) && f.Manager != s.fieldOwner:
			hub = false
		}
	}
	return hub
}
