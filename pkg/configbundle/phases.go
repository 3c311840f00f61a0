package configbundle

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"configbundle.dev/hub/api/configbundle/v1alpha1"
)

// scope is what one reconcile of one bundle reads and decides.
type scope struct {
	req        mcreconcile.Request // the bundle, and the member it lives in
	member     cluster.Cluster
	bundle     *v1alpha1.ConfigBundle
	fieldOwner string
	// memory is the reconciler's: the reconcile notes there every ConfigMap and status it
	// writes, and finds there the status it wrote moments ago.
	memory *memory

	// Set by sync, written to status by writeStatus.
	ready  metav1.Condition  // the Ready condition; empty when nothing could be decided
	cm     *corev1.ConfigMap // the managed ConfigMap, once it matches the bundle
	healed []string          // what drifted, when this reconcile healed it
}

// sync converges the bundle's ConfigMap and records the outcome in the scope. It returns an
// error to retry with back-off, a terminal error, or nil.
func (s *scope) sync(ctx context.Context) error {
	key := client.ObjectKey{Namespace: s.bundle.Namespace, Name: s.bundle.Name}
	cached := &corev1.ConfigMap{}
	var current *corev1.ConfigMap
	switch err := s.member.GetClient().Get(ctx, key, cached); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading ConfigMap from the cache: %w", err)
	case ownedBy(s.bundle, cached) && len(Drift(DesiredConfigMap(s.bundle), cached)) == 0:
		return s.synced(cached) // steady state costs no API call
	case isControlledByBundle(cached):
		current = cached // the cache holds it whole
	default:
		// The cache holds only the skeleton of a ConfigMap no bundle controls: read it whole.
		live, err := s.liveConfigMap(ctx, key)
		if err != nil {
			return err
		}
		return s.converge(ctx, live)
	}
	// Act on the cached ConfigMap. If the cache lagged (our own last write, say), the API server
	// refuses the write; then read the ConfigMap afresh and act once more.
	err := s.converge(ctx, current)
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
		return err
	}
	live, err := s.liveConfigMap(ctx, key)
	if err != nil {
		return err
	}
	s.ready = metav1.Condition{}
	return s.converge(ctx, live)
}

// converge makes current, the bundle's ConfigMap as last read (nil: none), match the bundle.
func (s *scope) converge(ctx context.Context, current *corev1.ConfigMap) error {
	if current == nil {
		return s.create(ctx, DesiredConfigMap(s.bundle))
	}
	if !ownedBy(s.bundle, current) {
		return s.conflict(current)
	}
	if s.specLeftPublished(current) {
		// The immutable ConfigMap is the record of the spec it was published from.
		if err := s.restoreSpec(ctx, current); err != nil {
			return err
		}
	}
	desired := DesiredConfigMap(s.bundle)
	drift := Drift(desired, current)
	switch {
	case len(drift) == 0:
		return s.synced(current)
	case ptr.Deref(current.Immutable, false) && contentDrift(drift):
		// Frozen behind the bundle's back: only a new ConfigMap can match again.
		return s.replace(ctx, desired, current, drift)
	default:
		return s.update(ctx, desired, current, drift)
	}
}

func (s *scope) liveConfigMap(ctx context.Context, key client.ObjectKey) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := s.member.GetAPIReader().Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading ConfigMap %s: %w", key, err)
	}
	return cm, nil
}

// specLeftPublished reports whether the bundle's spec moved away from the immutable ConfigMap
// the hub published from it; then the spec is restored from the ConfigMap, never the ConfigMap
// replaced. The rule rests on durable facts, not on status.observedGeneration (which a failed
// reconcile advances too, so that one failed restore would let the next reconcile publish the
// forbidden spec): the ConfigMap is immutable, its content is not the spec's, and it is exactly
// the one the hub published, that is the status records it and no one has written it since
// (!changedByOthers), or the reconciler remembers writing it (its status may not have been
// written). An immutable ConfigMap someone else wrote is drift, healed by replacing it.
func (s *scope) specLeftPublished(current *corev1.ConfigMap) bool {
	if !ptr.Deref(current.Immutable, false) || s.bundle.Spec == specFromConfigMap(current) {
		return false
	}
	return !s.changedByOthers(current) || s.memory.isOwnWrite(s.req, current.ResourceVersion)
}

// changedByOthers reports whether cm was written by someone else since the reconciler last saw
// it match the bundle: then a difference is drift to heal, not a change of the bundle to follow.
func (s *scope) changedByOthers(cm *corev1.ConfigMap) bool {
	ref := s.bundle.Status.ConfigMapRef
	return ref == nil || ref.UID != cm.UID || ref.ResourceVersion != cm.ResourceVersion
}

func (s *scope) create(ctx context.Context, desired *corev1.ConfigMap) error {
	cm := desired.DeepCopy()
	if err := s.member.GetClient().Create(ctx, cm, client.FieldOwner(s.fieldOwner)); err != nil {
		return s.failed(v1alpha1.CreateFailedReason, "creating ConfigMap "+objectName(desired), err)
	}
	s.memory.noteWrite(s.req, cm.ResourceVersion)
	if s.bundle.Status.ConfigMapRef != nil {
		s.healedDrift(ctx, cm, []string{DriftDeleted})
	}
	return s.synced(cm)
}

func (s *scope) update(ctx context.Context, desired, current *corev1.ConfigMap, drift []string) error {
	heal := s.changedByOthers(current)
	cm := desired.DeepCopy()
	cm.ResourceVersion = current.ResourceVersion
	cm.Finalizers = current.Finalizers
	if err := s.member.GetClient().Update(ctx, cm, client.FieldOwner(s.fieldOwner)); err != nil {
		return s.failed(v1alpha1.UpdateFailedReason, "updating ConfigMap "+objectName(desired), err)
	}
	s.memory.noteWrite(s.req, cm.ResourceVersion)
	if heal {
		s.healedDrift(ctx, cm, drift)
	}
	return s.synced(cm)
}

// replace deletes a ConfigMap that can no longer be updated and creates it anew.
func (s *scope) replace(ctx context.Context, desired, current *corev1.ConfigMap, drift []string) error {
	preconditions := client.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion}
	if err := s.member.GetClient().Delete(ctx, current, preconditions); client.IgnoreNotFound(err) != nil {
		return s.failed(v1alpha1.UpdateFailedReason, "deleting immutable ConfigMap "+objectName(current)+" to replace it", err)
	}
	cm := desired.DeepCopy()
	if err := s.member.GetClient().Create(ctx, cm, client.FieldOwner(s.fieldOwner)); err != nil {
		return s.failed(v1alpha1.CreateFailedReason, "recreating ConfigMap "+objectName(desired), err)
	}
	s.memory.noteWrite(s.req, cm.ResourceVersion)
	s.healedDrift(ctx, cm, drift)
	return s.synced(cm)
}

// restoreSpec sets the bundle's spec back to the one its immutable ConfigMap was made from.
func (s *scope) restoreSpec(ctx context.Context, current *corev1.ConfigMap) error {
	bundle := s.bundle.DeepCopy()
	bundle.Spec = specFromConfigMap(current)
	if err := s.member.GetClient().Update(ctx, bundle, client.FieldOwner(s.fieldOwner)); err != nil {
		return s.failed(v1alpha1.UpdateFailedReason, "restoring the spec from immutable ConfigMap "+objectName(current), err)
	}
	s.bundle = bundle
	logf.FromContext(ctx).Info("Restored the spec of an immutable bundle", "configMap", objectName(current))
	s.member.GetEventRecorder(s.fieldOwner).Eventf(s.bundle, current, corev1.EventTypeWarning, v1alpha1.SpecRestoredEvent, "RestoreSpec",
		"Cluster %s: the spec changed while ConfigMap %s is immutable; restored the spec from it", s.req.ClusterName, objectName(current))
	return nil
}

func (s *scope) conflict(current *corev1.ConfigMap) error {
	owner := "nothing"
	if ref := metav1.GetControllerOfNoCopy(current); ref != nil {
		owner = fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	s.setReady(metav1.ConditionFalse, v1alpha1.ConfigMapConflictReason, fmt.Sprintf(
		"ConfigMap %s already exists and is not managed by this ConfigBundle (its controller: %s); it is left untouched, and the bundle proceeds once it is gone",
		objectName(current), owner))
	return nil
}

func (s *scope) synced(cm *corev1.ConfigMap) error {
	s.cm = cm
	s.setReady(metav1.ConditionTrue, v1alpha1.SyncedReason, fmt.Sprintf("ConfigMap %s matches the bundle", objectName(cm)))
	return nil
}

// failed records a failed write. What the API server calls invalid is terminal: retrying cannot
// help until the bundle changes. Anything else is retried with back-off.
func (s *scope) failed(reason, action string, err error) error {
	if apierrors.IsInvalid(err) {
		s.setReady(metav1.ConditionFalse, v1alpha1.InvalidConfigMapReason, fmt.Sprintf("%s: %v", action, err))
		return reconcile.TerminalError(fmt.Errorf("%s: %w", action, err))
	}
	s.setReady(metav1.ConditionFalse, reason, fmt.Sprintf("%s: %v (retrying)", action, err))
	return fmt.Errorf("%s: %w", action, err)
}

func (s *scope) healedDrift(ctx context.Context, cm *corev1.ConfigMap, drift []string) {
	s.healed = drift
	what := strings.Join(drift, ", ")
	logf.FromContext(ctx).Info("Healed drift", "configMap", objectName(cm), "drift", drift)
	s.member.GetEventRecorder(s.fieldOwner).Eventf(s.bundle, cm, corev1.EventTypeNormal, v1alpha1.DriftHealedEvent, "Heal",
		"Cluster %s: healed ConfigMap %s (drifted: %s)", s.req.ClusterName, objectName(cm), what)
}

func (s *scope) setReady(status metav1.ConditionStatus, reason, message string) {
	s.ready = metav1.Condition{Type: v1alpha1.ReadyCondition, Status: status, Reason: reason, Message: message}
}

func objectName(obj client.Object) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}
