package configbundle

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// status computes the bundle's status from base (the status as stored), what this reconcile
// found, and the heals no written status counts yet (this reconcile's, and any whose status
// could not be written).
func (s *scope) status(base configbundlev1alpha1.ConfigBundleStatus, now metav1.Time, heals unrecordedHeals) configbundlev1alpha1.ConfigBundleStatus {
	st := *base.DeepCopy()
	st.ObservedGeneration = s.bundle.Generation
	if s.cm != nil {
		ref := &configbundlev1alpha1.ConfigMapReference{Name: s.cm.Name, UID: s.cm.UID, ResourceVersion: s.cm.ResourceVersion}
		if s.secret {
			st.SecretRef = ref
		} else {
			st.ConfigMapRef = ref
		}
	}
	if heals.count > 0 {
		st.Heals += heals.count
		st.LastHealTime = &metav1.Time{Time: heals.last}
	}
	st.Drift = s.drift
	ready := s.ready
	ready.ObservedGeneration = s.bundle.Generation
	ready.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// writeStatus writes the status once, and only if it changed, and notes it in the ledger. A
// conflict means the cached bundle was stale: the status is computed again on the bundle as
// stored, so that no heal is lost. Heals that no written status counts stay in the ledger for the next one.
func (s *scope) writeStatus(ctx context.Context) error {
	if s.ready.Type == "" {
		return nil
	}
	now := metav1.Now()
	heals := s.ledger.unrecordedHeals(s.req)
	stored := s.bundle.Status
	// Facts already written moments ago: the cached bundle has not caught up with that write
	// yet (the ConfigMap's watch event can overtake it). Writing again would only conflict.
	if recent := s.ledger.recentStatus(s.req, s.bundle.UID); recent != nil {
		if equality.Semantic.DeepEqual(s.status(*recent, now, heals), *recent) {
			return nil
		}
		stored = *recent
	}
	if s.statusDue = s.healStatusWait(stored, now, heals); s.statusDue > 0 {
		return nil
	}
	bundle := s.bundle
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want := s.status(bundle.Status, now, heals)
		if equality.Semantic.DeepEqual(want, bundle.Status) {
			return nil
		}
		updated := bundle.DeepCopy()
		updated.Status = want
		err := s.member.GetClient().Status().Update(ctx, updated, client.FieldOwner(s.fieldOwner))
		if err == nil {
			s.ledger.noteStatus(s.req, bundle.UID, updated.Status)
			s.ledger.noteHealsRecorded(s.req, heals.count)
			s.ledger.noteBundleWrite(s.req, updated.ResourceVersion)
		}
		if apierrors.IsConflict(err) {
			fresh := &configbundlev1alpha1.ConfigBundle{}
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

// healStatusWait returns how long the status write may wait: a status that would change only by
// counting heals (heals, lastHealTime, and the ConfigMap the heals wrote) waits until
// healStatusDelay after the first heal it would count. The heal's ConfigMap write stays alone on
// the hot path, and a fighting writer costs one status write per delay, not one per heal; the
// heals wait in the ledger meanwhile. Any other change of the status is written at once, with
// them.
func (s *scope) healStatusWait(stored configbundlev1alpha1.ConfigBundleStatus, now metav1.Time, heals unrecordedHeals) time.Duration {
	wait := heals.first.Add(s.healStatusDelay).Sub(now.Time)
	if heals.count == 0 || wait <= 0 {
		return 0
	}
	want := s.status(stored, now, heals)
	want.Heals, want.LastHealTime, want.ConfigMapRef, want.SecretRef = stored.Heals, stored.LastHealTime, stored.ConfigMapRef, stored.SecretRef
	if !equality.Semantic.DeepEqual(want, stored) {
		return 0
	}
	return wait
}

// unreported returns the Ready condition the bundle's status should show but does not, because
// the status could not be written; nil if it was written, or needed no write. The condition
// keeps the reconcile's own failure, if it met one, as the cause (its reason, and the start of
// its message); a status write the member forbade makes the reason Forbidden, whatever the
// cause: the hub lost a right there.
func (s *scope) unreported() *metav1.Condition {
	if s.statusErr == nil {
		return nil
	}
	c := s.ready
	c.ObservedGeneration, c.LastTransitionTime = s.bundle.Generation, metav1.Now()
	if c.Status == metav1.ConditionTrue {
		c.Status, c.Reason = metav1.ConditionFalse, configbundlev1alpha1.StatusWriteFailedReason
		c.Message = fmt.Sprintf("%s, but the status could not be written: %v", c.Message, s.statusErr)
	} else {
		c.Message = fmt.Sprintf("%s; the status could not be written: %v", c.Message, s.statusErr)
	}
	if apierrors.IsForbidden(s.statusErr) {
		c.Reason = configbundlev1alpha1.ForbiddenReason
	}
	return &c
}

// Unreported is a bundle whose outcome the reconciler could not write to its status.
type Unreported struct {
	// Bundle is the bundle's namespace and name.
	Bundle types.NamespacedName

	// Ready is the Ready condition the bundle's status should show: False, with the reason of
	// the failure the reconcile met (CreateFailed, say), or configbundlev1alpha1.StatusWriteFailedReason if it met
	// none; its message ends with why the status could not be written.
	Ready metav1.Condition
}

// Unreported returns the bundles of member name whose last reconcile could not write its outcome
// to their status, sorted by namespace and name. Their status says nothing, or something
// outdated: the hub's reports must count them by Ready, as failed. A bundle leaves the list when
// a reconcile writes its status (or finds no write needed), when it is deleted, and when the
// member leaves.
func (r *Reconciler) Unreported(name multicluster.ClusterName) []Unreported {
	conditions := r.ledger.unreported(name)
	out := make([]Unreported, 0, len(conditions))
	for key, ready := range conditions {
		out = append(out, Unreported{Bundle: key, Ready: ready})
	}
	slices.SortFunc(out, func(a, b Unreported) int {
		return cmp.Or(cmp.Compare(a.Bundle.Namespace, b.Bundle.Namespace), cmp.Compare(a.Bundle.Name, b.Bundle.Name))
	})
	return out
}
