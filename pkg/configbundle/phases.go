package configbundle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// scope is what one reconcile of one bundle reads and decides.
type scope struct {
	req        mcreconcile.Request // the bundle, and the member it lives in
	member     cluster.Cluster
	bundle     *configbundlev1alpha1.ConfigBundle
	live       bool // the bundle was read from the API server, and so is its ConfigMap
	fieldOwner string
	// healStatusDelay is Options.HealStatusDelay.
	healStatusDelay time.Duration
	// ledger is the reconciler's: the reconcile notes there every ConfigMap and status it
	// writes, and finds there the status it wrote moments ago.
	ledger *ledger
	// secret: the bundle's target is Secret; hubSources is Options.HubSources, and secretData
	// what it resolved the bundle's spec.hubSource to.
	secret     bool
	hubSources HubSources
	secretData map[string][]byte

	// Set by sync, written to status by writeStatus.
	ready  metav1.Condition  // the Ready condition; empty when nothing could be decided
	cm     *corev1.ConfigMap // the managed ConfigMap, once it matches the bundle
	healed []string          // what drifted, when this reconcile healed it
	fight  bool              // this reconcile's heal made a fight
	// healedAt is when the heal's write was answered.
	healedAt time.Time
	// adopting: the ConfigMap being converged is not the bundle's yet: an earlier bundle's
	// garbage (adoptable), or one the bundle takes over (spec.takeOver, then takenFrom is set).
	// Its rewrite is no heal, and no drift to report.
	adopting bool
	// drift is what status.drift is to say: the drift reported with driftPolicy Report; nil if
	// none.
	drift *configbundlev1alpha1.DriftStatus
	// takenFrom: the ConfigMap being converged is one the bundle takes over (spec.takeOver),
	// and these are the field managers that wrote it.
	takenFrom []string
	// failure is the Ready reason of the write that failed, if one did; statusErr is the error
	// of writing the status.
	failure   string
	statusErr error
	// statusDue, if not zero, is when the status that writeStatus let wait is to be written.
	statusDue time.Duration
}

// sync converges the bundle's ConfigMap and records the outcome in the scope. It returns an
// error to retry with back-off, a terminal error, or nil.
func (s *scope) sync(ctx context.Context) error {
	key := client.ObjectKey{Namespace: s.bundle.Namespace, Name: s.bundle.Name}
	if s.secret {
		if done, err := s.resolveSecret(ctx); done {
			return err
		}
	}
	if s.live {
		return s.convergeLive(ctx, key)
	}
	var current *corev1.ConfigMap
	switch cached, err := s.get(ctx, s.member.GetClient(), key); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading %s from the cache: %w", s.kind(), err)
	case !s.secret && !isControlledByBundle(cached) && maybeSkeleton(cached):
		// The cache holds only the skeleton of a ConfigMap no bundle controls: read it whole.
		return s.convergeLive(ctx, key)
	case ownedBy(s.bundle, cached) && len(Drift(s.desired(), cached)) == 0:
		if !s.ledger.lagsOwnWrite(s.req, cached.ResourceVersion) {
			return s.setSynced(cached) // steady state costs no API call
		}
		// The cache has not caught up with the hub's own last write: the status must not record
		// an older ConfigMap as the one published.
		return s.convergeLive(ctx, key)
	default:
		current = cached // the cache holds it whole
	}
	// Act on the cached ConfigMap. If the cache lagged (our own last write, say), the API server
	// refuses the write; then read the ConfigMap afresh and act once more.
	err := s.converge(ctx, current)
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
		return err
	}
	s.ready = metav1.Condition{}
	return s.convergeLive(ctx, key)
}

// convergeLive reads the bundle's ConfigMap from the API server and converges it.
func (s *scope) convergeLive(ctx context.Context, key client.ObjectKey) error {
	live, err := s.liveConfigMap(ctx, key)
	if err != nil {
		return err
	}
	return s.converge(ctx, live)
}

// converge makes current, the bundle's ConfigMap as last read (nil: none), match the bundle.
func (s *scope) converge(ctx context.Context, current *corev1.ConfigMap) error {
	if current == nil {
		return s.create(ctx, s.desired())
	}
	if !ownedBy(s.bundle, current) {
		// Whose the ConfigMap is, is decided on the bundle as stored: a cached bundle may lag
		// the status write that recorded the ConfigMap as its own, whose ownerReference someone
		// removed or demoted since.
		if gone, err := s.bundleGone(ctx); err != nil || gone {
			return err
		}
	}
	if !ownedBy(s.bundle, current) {
		var proceed bool
		var err error
		if current, proceed, err = s.foreign(ctx, current); !proceed {
			return err
		}
	}
	if !s.adopting && s.specLeftPublished(current) {
		// The immutable ConfigMap is the record of the spec it was published from.
		if err := s.restoreSpec(ctx, current); err != nil {
			return err
		}
	}
	desired := s.desired()
	drift := Drift(desired, current)
	if len(drift) > 0 && !s.adopting && s.reportsDrift() {
		switch others, err := s.changedByOthers(ctx, current); {
		case err != nil:
			return err
		case others:
			fields := DriftFields(desired, current)
			s.reportDrift(ctx, current, fields, ChangedBy(current.ManagedFields, fields, s.fieldOwner))
			return nil
		}
	}
	var err error
	switch {
	case len(drift) == 0:
		return s.setSynced(current)
	case ptr.Deref(current.Immutable, false) && contentDrift(drift), slices.Contains(drift, DriftType):
		// Frozen behind the bundle's back, or a Secret of another type: only a new one can
		// match again.
		err = s.replace(ctx, current, drift)
	default:
		err = s.update(ctx, desired, current, drift)
	}
	if err == nil && s.takenFrom != nil && s.cm != nil {
		s.tookOver(ctx, s.cm)
	}
	return err
}

// foreign decides what to do with current, a ConfigMap of the bundle's name that the bundle as
// stored does not own: adopt it (the garbage of an earlier bundle of the name), take it over
// (spec.takeOver), or leave it alone (a conflict, or garbage on its way out). It returns the
// ConfigMap to converge and whether to converge it.
func (s *scope) foreign(ctx context.Context, current *corev1.ConfigMap) (*corev1.ConfigMap, bool, error) {
	switch {
	case !s.adoptable(current):
		return s.takeOver(ctx, current)
	case !current.DeletionTimestamp.IsZero():
		// Garbage whose deletion a finalizer holds: its deletion wakes the bundle.
		s.ready = metav1.Condition{}
		logf.FromContext(ctx).V(1).Info("Waiting for the ConfigMap of an earlier bundle to go", "configMap", objectName(current))
		return nil, false, nil
	}
	s.adopting = true
	logf.FromContext(ctx).Info("Adopting the ConfigMap of an earlier bundle of the same name", "configMap", objectName(current),
		"previousOwner", metav1.GetControllerOfNoCopy(current).UID)
	return current, true, nil
}

func (s *scope) liveConfigMap(ctx context.Context, key client.ObjectKey) (*corev1.ConfigMap, error) {
	cm, err := s.get(ctx, s.member.GetAPIReader(), key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", s.kind(), key, err)
	}
	return cm, nil
}

// specLeftPublished reports whether the bundle's spec moved away from the immutable ConfigMap
// the hub published from it; then the spec is restored from the ConfigMap, never the ConfigMap
// replaced. The rule rests on durable facts, not on status.observedGeneration (which a failed
// reconcile advances too, so that one failed restore would let the next reconcile publish the
// forbidden spec): the ConfigMap is immutable, its content is not the spec's, and it is exactly
// the one the hub published (published). An immutable ConfigMap someone else wrote is drift,
// healed by replacing it.
func (s *scope) specLeftPublished(current *corev1.ConfigMap) bool {
	if s.secret || !ptr.Deref(current.Immutable, false) || s.bundle.Spec.Equal(specFromConfigMap(current)) {
		return false
	}
	return s.published(current)
}

func (s *scope) create(ctx context.Context, desired *corev1.ConfigMap) error {
	heal := s.hadPublished() // then someone deleted it
	if heal {
		if gone, err := s.bundleGone(ctx); err != nil || gone {
			return err
		}
		desired = s.desired()
		if s.reportsDrift() {
			s.reportDrift(ctx, desired, []string{DriftDeleted}, configbundlev1alpha1.ChangedByDeleted)
			return nil
		}
		heal = s.heals()
	}
	cm := desired.DeepCopy()
	if err := s.createObject(ctx, cm); err != nil {
		return s.fail(configbundlev1alpha1.CreateFailedReason, "creating "+s.named(desired), err)
	}
	s.ledger.noteWrite(s.req, cm.ResourceVersion)
	if heal {
		s.healedDrift(ctx, cm, []string{DriftDeleted}, configbundlev1alpha1.ChangedByDeleted)
	}
	return s.setSynced(cm)
}

func (s *scope) update(ctx context.Context, desired, current *corev1.ConfigMap, drift []string) error {
	heal := false
	if !s.adopting && s.heals() {
		var err error
		if heal, err = s.changedByOthers(ctx, current); err != nil {
			return err
		}
	}
	cm := desired.DeepCopy()
	cm.ResourceVersion = current.ResourceVersion
	cm.Finalizers = current.Finalizers
	if err := s.updateObject(ctx, cm); err != nil {
		return s.fail(configbundlev1alpha1.UpdateFailedReason, "updating "+s.named(desired), err)
	}
	s.ledger.noteWrite(s.req, cm.ResourceVersion)
	if heal {
		s.healedDrift(ctx, cm, drift, ChangedBy(current.ManagedFields, DriftFields(desired, current), s.fieldOwner))
	}
	return s.setSynced(cm)
}

// replace deletes a ConfigMap that can no longer be updated and creates it anew: an immutable one,
// or a Secret of another type. The new type is checked first (a dry-run create), so that a Secret
// the API server would refuse never costs the member the one it has.
func (s *scope) replace(ctx context.Context, current *corev1.ConfigMap, drift []string) error {
	heal, what := !s.adopting && s.heals(), "immutable "+s.named(current)
	if slices.Contains(drift, DriftType) {
		what = s.named(current) + " of type " + string(viewType(current))
		probe := s.object(s.desired())
		if err := s.member.GetClient().Create(ctx, probe, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			return s.fail(configbundlev1alpha1.CreateFailedReason, "creating "+s.named(current)+" of type "+string(probe.(*corev1.Secret).Type), err)
		}
		if heal {
			// Only the hub gives its Secret a type: a new one follows the spec, and is a heal only
			// if someone else wrote the Secret besides.
			var err error
			if heal, err = s.changedByOthers(ctx, current); err != nil {
				return err
			}
		}
	}
	preconditions := client.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion}
	if err := s.member.GetClient().Delete(ctx, s.object(current), preconditions); client.IgnoreNotFound(err) != nil {
		return s.fail(configbundlev1alpha1.UpdateFailedReason, "deleting "+what+" to replace it", err)
	}
	if gone, err := s.bundleGone(ctx); err != nil || gone {
		return err
	}
	cm := s.desired()
	if err := s.createObject(ctx, cm); err != nil {
		return s.fail(configbundlev1alpha1.CreateFailedReason, "recreating "+s.named(cm), err)
	}
	s.ledger.noteWrite(s.req, cm.ResourceVersion)
	if heal {
		s.healedDrift(ctx, cm, drift, ChangedBy(current.ManagedFields, DriftFields(cm, current), s.fieldOwner))
	}
	return s.setSynced(cm)
}

// bundleGone reads the bundle from the API server (unless this reconcile read it from there
// already) before a create that follows a deletion, and before the ConfigMap is taken for
// another's: a bundle that is gone, or going, never gets a new ConfigMap (the cache may not know
// yet, and the garbage collector would only delete the ConfigMap again). A bundle that is still
// there replaces the cached one, which may lag.
func (s *scope) bundleGone(ctx context.Context) (bool, error) {
	if s.live {
		return false, nil // read from the API server moments ago
	}
	live := &configbundlev1alpha1.ConfigBundle{}
	switch err := s.member.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(s.bundle), live); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, s.fail(configbundlev1alpha1.CreateFailedReason, "reading the bundle before writing its ConfigMap", err)
	case live.UID == s.bundle.UID && live.DeletionTimestamp.IsZero():
		s.bundle = live
		s.ledger.noteLiveRead(s.req, live.ResourceVersion)
		return false, nil
	}
	s.ready = metav1.Condition{}
	logf.FromContext(ctx).V(1).Info("Bundle gone: its ConfigMap is not recreated")
	return true, nil
}

// restoreSpec sets the bundle's spec back to the one its immutable ConfigMap was made from.
func (s *scope) restoreSpec(ctx context.Context, current *corev1.ConfigMap) error {
	bundle := s.bundle.DeepCopy()
	restored := specFromConfigMap(current)
	bundle.Spec.Message, bundle.Spec.Data, bundle.Spec.Immutable = restored.Message, restored.Data, restored.Immutable
	if err := s.member.GetClient().Update(ctx, bundle, client.FieldOwner(s.fieldOwner)); err != nil {
		return s.fail(configbundlev1alpha1.UpdateFailedReason, "restoring the spec from immutable ConfigMap "+objectName(current), err)
	}
	s.bundle = bundle
	s.ledger.noteBundleWrite(s.req, bundle.ResourceVersion)
	logf.FromContext(ctx).Info("Restored the spec of an immutable bundle", "configMap", objectName(current))
	s.member.GetEventRecorder(s.fieldOwner).Eventf(s.reference(), s.related(current), corev1.EventTypeWarning, configbundlev1alpha1.SpecRestoredEvent, "RestoreSpec",
		"Cluster %s: the spec changed while ConfigMap %s is immutable; restored the spec from it", s.req.ClusterName, objectName(current))
	return nil
}

// adoptable reports whether cm, which the bundle as stored does not own, is the garbage of an
// earlier bundle of the same name: its controller is a ConfigBundle of this name and namespace
// (ownerReferences are namespaced) with another uid. While this bundle exists, no other
// ConfigBundle of its name can: that owner is gone (a placed bundle deleted and placed again, a
// bundle deleted and recreated), and the garbage collector has not removed its ConfigMap yet.
//
// The garbage is adopted rather than waited for: the bundle is Synced at once instead of
// reporting a conflict (or waiting) for as long as the collector takes. Adoption is a
// resourceVersion-preconditioned update of the ConfigMap (or, if it is immutable and its content
// differs, a preconditioned delete and a create), and the collector deletes a dependent on the
// condition of the resourceVersion it read, too: whichever writes first wins, and the other
// sees a conflict. If the adoption wins, the collector reads the ConfigMap again, finds its
// owner alive and keeps it; if the deletion wins, the bundle finds the ConfigMap gone and
// creates its own. A ConfigMap controlled by anything else (another kind, a ConfigBundle of
// another name) or by nothing is a conflict, left untouched.
func (s *scope) adoptable(cm *corev1.ConfigMap) bool {
	ref := metav1.GetControllerOfNoCopy(cm)
	return ref != nil && isControlledByBundle(cm) && ref.Name == s.bundle.Name && ref.UID != s.bundle.UID
}

func (s *scope) conflict(current *corev1.ConfigMap) {
	s.setReady(metav1.ConditionFalse, s.conflictReason(), fmt.Sprintf(
		"%s already exists and is not managed by this ConfigBundle (its controller: %s); it is left untouched, and the bundle proceeds once it is gone",
		s.named(current), controllerOf(current)))
}

// controllerOf names the controller of cm, as a conflict message says it: "nothing" if none.
func controllerOf(cm *corev1.ConfigMap) string {
	if ref := metav1.GetControllerOfNoCopy(cm); ref != nil {
		return fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	return "nothing"
}

// setSynced records that cm, the managed ConfigMap, matches the bundle.
func (s *scope) setSynced(cm *corev1.ConfigMap) error {
	s.cm = cm
	s.setReady(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason, fmt.Sprintf("%s matches the bundle", s.named(cm)))
	return nil
}

// fail records a failed write. A conflict is retried, and reported nowhere. What the API
// server's own validation calls invalid is terminal: retrying cannot help until the bundle
// changes. Anything else is retried with back-off, capped at Options.RetryMaxDelay: that includes an admission policy or webhook that refuses the write,
// whatever reason it gives, since a policy can change and the write must go through once it has.
func (s *scope) fail(reason, action string, err error) error {
	s.failure = reason
	if apierrors.IsConflict(err) {
		// Someone wrote the object between the read and the write: no failure to report, only a
		// retry on a fresh read. The status says what it said, so that a fighting writer does not
		// make Ready flap.
		s.ready = metav1.Condition{}
		return fmt.Errorf("%s: %w", action, err)
	}
	if apierrors.IsInvalid(err) && !refusedByAdmission(err) {
		s.failure = s.invalidReason()
		s.setReady(metav1.ConditionFalse, s.failure, fmt.Sprintf("%s: %v", action, err))
		return reconcile.TerminalError(fmt.Errorf("%s: %w", action, err))
	}
	s.setReady(metav1.ConditionFalse, reason, fmt.Sprintf("%s: %v (retrying)", action, err))
	return fmt.Errorf("%s: %w", action, err)
}

// healedDrift records a heal: the log line, the DriftHealed Event, and, when the heal makes a
// fight, its Warning. The Events refer to the bundle and the ConfigMap without their
// resourceVersions, which change with every heal, so that the recorder can aggregate the Events
// of one bundle into a series.
func (s *scope) healedDrift(ctx context.Context, cm *corev1.ConfigMap, drift []string, changedBy string) {
	s.healed, s.healedAt = drift, time.Now()
	fighting := s.ledger.noteHeal(s.req, s.healedAt, drift)
	log := logf.FromContext(ctx)
	recorder := s.member.GetEventRecorder(s.fieldOwner)
	regarding, related := s.reference(), s.related(cm)
	log.Info("Healed drift", "configMap", objectName(cm), "drift", drift, "changedBy", changedBy)
	recorder.Eventf(regarding, related, corev1.EventTypeNormal, configbundlev1alpha1.DriftHealedEvent, "Heal",
		"Cluster %s: healed %s (drifted: %s; changed by %s)", s.req.ClusterName, s.named(cm), strings.Join(drift, ", "), changedBy)
	if fighting == nil {
		return
	}
	s.fight = true
	within := fighting.within.Round(time.Millisecond)
	log.Info("Fighting another writer", "configMap", objectName(cm), "heals", FightHeals, "within", within, "drift", fighting.drift)
	recorder.Eventf(regarding, related, corev1.EventTypeWarning, configbundlev1alpha1.FightingWriterEvent, "Heal",
		"Cluster %s: %s was healed %d times in %s (a fight: %d within %s): another writer keeps changing its %s; the hub keeps healing it",
		s.req.ClusterName, s.named(cm), FightHeals, within, FightHeals, FightWindow, strings.Join(fighting.drift, ", "))
}

// reference refers to the bundle for an Event, without its resourceVersion.
func (s *scope) reference() *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle",
		Namespace: s.bundle.Namespace, Name: s.bundle.Name, UID: s.bundle.UID,
	}
}

// related refers to the bundle's ConfigMap or Secret for an Event, without its resourceVersion.
func (s *scope) related(cm *corev1.ConfigMap) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: s.kind(), Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID}
}

func (s *scope) setReady(status metav1.ConditionStatus, reason, message string) {
	s.ready = metav1.Condition{Type: configbundlev1alpha1.ReadyCondition, Status: status, Reason: reason, Message: message}
}

func objectName(obj client.Object) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}

// refusedByAdmission reports whether err is the refusal of a ValidatingAdmissionPolicy or of an
// admission webhook (their messages say so, as the API server words them), not of the API
// server's own validation.
func refusedByAdmission(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	msg := status.Status().Message
	return strings.Contains(msg, "ValidatingAdmissionPolicy '") && strings.Contains(msg, "denied request") ||
		strings.Contains(msg, "admission webhook \"") && strings.Contains(msg, "denied the request")
}
