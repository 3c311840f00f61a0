package configbundle

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/api/configbundle/v1alpha1"
)

// status computes the bundle's status from base (the status as stored) and what this reconcile
// found and did.
func (s *scope) status(base v1alpha1.ConfigBundleStatus, now metav1.Time) v1alpha1.ConfigBundleStatus {
	st := *base.DeepCopy()
	st.ObservedGeneration = s.bundle.Generation
	if s.cm != nil {
		st.ConfigMapRef = &v1alpha1.ConfigMapReference{Name: s.cm.Name, UID: s.cm.UID, ResourceVersion: s.cm.ResourceVersion}
	}
	if s.healed != nil {
		st.Heals++
		st.LastHealTime = &now
	}
	ready := s.ready
	ready.ObservedGeneration = s.bundle.Generation
	ready.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// writeStatus writes the status once, and only if it changed, and notes it in memory. A conflict
// means the cached bundle was stale: the status is computed again on the bundle as stored, so
// that no heal is lost.
func (s *scope) writeStatus(ctx context.Context) error {
	if s.ready.Type == "" {
		return nil
	}
	now := metav1.Now()
	// Facts already written moments ago: the cached bundle has not caught up with that write
	// yet (the ConfigMap's watch event can overtake it). Writing again would only conflict.
	if recent := s.memory.recentStatus(s.req, s.bundle.UID); recent != nil && equality.Semantic.DeepEqual(s.status(*recent, now), *recent) {
		return nil
	}
	bundle := s.bundle
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want := s.status(bundle.Status, now)
		if equality.Semantic.DeepEqual(want, bundle.Status) {
			return nil
		}
		updated := bundle.DeepCopy()
		updated.Status = want
		err := s.member.GetClient().Status().Update(ctx, updated, client.FieldOwner(s.fieldOwner))
		if err == nil {
			s.memory.noteStatus(s.req, bundle.UID, updated.Status)
		}
		if apierrors.IsConflict(err) {
			fresh := &v1alpha1.ConfigBundle{}
			if getErr := s.member.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(bundle), fresh); getErr != nil {
				return getErr
			}
			bundle = fresh
		}
		return err
	})
	if err := client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}
