package placement

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
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
)

// scope is one reconcile of one pair.
type scope struct {
	r      *Reconciler
	pair   pair
	member cluster.Cluster
	// cluster identifies the member's cluster (its kube-system uid): what the ledger remembers
	// placing is about that cluster.
	cluster       string
	fb            *hubv1alpha1.FleetBundle   // nil: gone
	memberCluster *hubv1alpha1.MemberCluster // nil: gone
	// placing is whether the FleetBundle places a bundle in the member (it is selected).
	placing bool
	// want is the bundle the member should hold, once step decided it.
	want *configbundlev1alpha1.ConfigBundle

	// outcome is the pair's failure, if any, once converged.
	outcome Outcome
	// healed lists what was restored, if this reconcile healed the placed bundle.
	healed []string
}

// converge acts on the member's bundle as its cache holds it, and once more on what the API
// server holds if the first write was refused as stale.
func (s *scope) converge(ctx context.Context) (ctrl.Result, error) {
	res, err := s.step(ctx, s.member.GetClient())
	if errors.Is(err, rollout.ErrStale) {
		res, err = s.step(ctx, s.member.GetAPIReader())
	}
	return res, err
}

// step reads the member's bundle with reader and converges it: removed if none is wanted,
// otherwise created, replaced, updated, or left alone if it is not the hub's. In a paused member
// it only heals what the member holds (healHeld).
func (s *scope) step(ctx context.Context, reader client.Reader) (ctrl.Result, error) {
	current := &configbundlev1alpha1.ConfigBundle{}
	switch err := reader.Get(ctx, s.pair.fb, current); {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the placed bundle: %w", err)
	}
	ownership := OwnershipOf(current, s.pair.fb, s.uid())
	if ownership == Own || ownership == Stale {
		switch {
		case orphaning(current):
			return ctrl.Result{}, s.finishOrphaning(ctx, current)
		case !current.DeletionTimestamp.IsZero():
			// Going (a finalizer holds its deletion): nothing to write until it is gone; its
			// deletion wakes the pair.
			return ctrl.Result{}, nil
		case s.r.ledger.wasRemoved(s.pair, current.UID):
			// The hub removed it moments ago and the cache has not seen it go: never take it for
			// the hub's placement (it would count a heal once it is gone).
			return ctrl.Result{}, fmt.Errorf("reading the placed bundle: %w: the hub removed bundle uid %s", rollout.ErrStale, current.UID)
		}
	}
	if s.memberCluster.Spec.Paused {
		return ctrl.Result{}, s.healHeld(ctx, current, ownership)
	}
	if !s.placing {
		if ownership == Own && !s.removalAdmitted() {
			return ctrl.Result{}, nil // the status that admits it brings the pair back
		}
		return ctrl.Result{}, s.remove(ctx, current, ownership)
	}
	switch ownership {
	case Foreign:
		s.outcome = Outcome{Reason: hubv1alpha1.ConflictReason, Message: fmt.Sprintf(
			"ConfigBundle %s/%s exists in member %s and was not placed by the hub: it is left untouched, and placed once it is gone", current.Namespace, current.Name, s.pair.member)}
		s.r.ledger.noteRefused(s.pair, s.target(nil))
		return ctrl.Result{}, nil // its deletion wakes the pair
	case Stale:
		if err := s.remove(ctx, current, ownership); err != nil {
			return ctrl.Result{}, err
		}
		current, ownership = nil, Absent
	}
	n := s.target(current)
	if n == 0 { // no revision decided for the member yet: it keeps what it holds
		if ownership == Own {
			s.r.ledger.setPlaced(s.pair, s.placement())
		}
		return ctrl.Result{}, nil
	}
	rev, err := s.r.revision(ctx, s.fb, n)
	switch {
	case apierrors.IsNotFound(err):
		s.revisionMissing(n)
		return ctrl.Result{}, nil // nothing to write; a new revision for the member brings the pair back
	case err != nil:
		return ctrl.Result{}, err
	}
	if s.want, err = DesiredOf(s.fb, *rev, s.memberOf()); err != nil {
		s.outcome = Outcome{Reason: hubv1alpha1.RenderFailedReason, Message: fmt.Sprintf(
			"revision %d does not render for member %s: %v; the member keeps what it holds", rev.Number, s.pair.member, err)}
		s.r.ledger.noteRefused(s.pair, rev.Number)
		return ctrl.Result{}, nil // a change of the member's labels or of the FleetBundle brings the pair back
	}
	if ownership == Absent {
		res, err := s.create(ctx)
		return s.restart(ctx, res, err)
	}
	return s.restart(ctx, ctrl.Result{}, s.update(ctx, current))
}

// healHeld is all placement does in a paused member: what it holds stays true. If it holds the
// FleetBundle's bundle at a revision that still exists, and that revision renders for the member
// with the template hash, revision and render hash the bundle carries, drift of the bundle is
// healed (update, as a heal). Nothing else is written: no create, no new revision or rendering,
// no removal (the FleetBundle gone, the member not selected, or a stale bundle).
func (s *scope) healHeld(ctx context.Context, current *configbundlev1alpha1.ConfigBundle, ownership Ownership) error {
	if ownership != Own || s.fb == nil || !s.fb.DeletionTimestamp.IsZero() {
		return nil
	}
	held := rollout.HeldRevision(current)
	if held == 0 {
		return nil
	}
	rev, err := s.r.revision(ctx, s.fb, held)
	switch {
	case apierrors.IsNotFound(err):
		s.revisionMissing(held)
		return nil
	case err != nil:
		return err
	}
	want, err := DesiredOf(s.fb, *rev, s.memberOf())
	if err != nil || !sameRendering(want, current) {
		return nil // it would be another rendering: a new write, which waits for the resume
	}
	s.want = want
	return s.update(ctx, current)
}

// revisionMissing reports that revision n, which the member holds or should get, is missing (its
// ControllerRevision was deleted): nothing says what the member should hold.
func (s *scope) revisionMissing(n int64) {
	s.outcome = Outcome{Reason: hubv1alpha1.RevisionMissingReason, Message: fmt.Sprintf(
		"revision %d of FleetBundle %s/%s is missing (ControllerRevision %s is gone): member %s keeps what it holds, unhealed",
		n, s.fb.Namespace, s.fb.Name, rollout.RevisionName(s.fb.Name, n), s.pair.member)}
}

// sameRendering reports whether two bundles carry the same template hash, revision and render
// hash: the one is the other's rendering, drift aside.
func sameRendering(a, b *configbundlev1alpha1.ConfigBundle) bool {
	return !slices.ContainsFunc(renderingAnnotations, func(k string) bool { return a.Annotations[k] != b.Annotations[k] })
}

// renderingAnnotations are the annotations that say from what a placed bundle was rendered.
var renderingAnnotations = []string{hubv1alpha1.FleetBundleTemplateHashAnnotation, hubv1alpha1.FleetBundleRevisionAnnotation, hubv1alpha1.FleetBundleRenderHashAnnotation,
	hubv1alpha1.DeletionPolicyAnnotation}

// target is the revision the member gets (TargetRevision), given the bundle it holds (nil:
// none). A member that refused updateRevision keeps being given it, with the controller's
// back-off, while the rollout is halted: the halt holds until the member takes it.
func (s *scope) target(current *configbundlev1alpha1.ConfigBundle) int64 {
	n := rollout.TargetRevision(s.fb, s.pair.member, s.memberCluster.Labels, rollout.HeldRevision(current))
	u, ro := s.fb.Status.UpdateRevision, s.fb.Status.Rollout
	if n != u && u != 0 && ro != nil && ro.Phase == hubv1alpha1.RolloutHalted && s.r.ledger.refusedRevision(s.pair) == u {
		return u
	}
	return n
}

// memberOf is what a template sees of the pair's member.
func (s *scope) memberOf() template.Member {
	return template.Member{Name: s.pair.member, Labels: s.memberCluster.Labels}
}

// uid is the FleetBundle's uid, or "" if it is gone.
func (s *scope) uid() types.UID {
	if s.fb == nil {
		return ""
	}
	return s.fb.UID
}

// placement is what the hub places for the pair: in the member's cluster, for the FleetBundle.
func (s *scope) placement() placement {
	return placement{cluster: s.cluster, fleetBundle: s.fb.UID}
}

// remove deletes the member's bundle if the hub placed it, on the condition that it is still the
// one read (uid precondition).
func (s *scope) remove(ctx context.Context, current *configbundlev1alpha1.ConfigBundle, ownership Ownership) error {
	if ownership != Own && ownership != Stale {
		return nil
	}
	orphan := s.deletionPolicy(current) == hubv1alpha1.DeletionPolicyOrphan
	opts := []client.DeleteOption{client.Preconditions{UID: &current.UID}}
	if orphan {
		opts = append(opts, client.PropagationPolicy(metav1.DeletePropagationOrphan))
	}
	err := s.member.GetClient().Delete(ctx, current, opts...)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return fmt.Errorf("removing the placed bundle: %w: %w", rollout.ErrStale, err)
	case err != nil:
		s.outcome = failed("removing", err)
		return fmt.Errorf("removing the placed bundle: %w", err)
	}
	s.r.ledger.forget(s.pair, current.UID)
	if orphan {
		return s.orphaned(ctx, current)
	}
	ctrl.LoggerFrom(ctx).Info("Removed placed bundle", "stale", ownership == Stale)
	return nil
}

// create places the bundle. A missing namespace is created with spec.createNamespace, and
// otherwise reported and tried again later.
func (s *scope) create(ctx context.Context) (ctrl.Result, error) {
	b := s.want.DeepCopy()
	s.r.ledger.notePlacementDue(s.pair, time.Now())
	err := s.member.GetClient().Create(ctx, b, client.FieldOwner(s.r.opts.FieldOwner))
	if apierrors.IsNotFound(err) && s.fb.Spec.CreateNamespace {
		if err = s.createNamespace(ctx, b.Namespace); err == nil {
			b = s.want.DeepCopy()
			err = s.member.GetClient().Create(ctx, b, client.FieldOwner(s.r.opts.FieldOwner))
		}
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		return ctrl.Result{}, fmt.Errorf("placing the bundle: %w: %w", rollout.ErrStale, err)
	case apierrors.IsNotFound(err):
		s.outcome = Outcome{Reason: hubv1alpha1.NamespaceMissingReason, Message: fmt.Sprintf(
			"namespace %s does not exist in member %s: the bundle is placed once it exists (or set spec.createNamespace to have the hub create it)", b.Namespace, s.pair.member)}
		s.r.ledger.noteRefused(s.pair, rollout.HeldRevision(b))
		return ctrl.Result{RequeueAfter: s.r.opts.NamespaceMissingRetry}, nil
	case err != nil:
		s.outcome = failed("creating", err)
		s.r.ledger.noteRefused(s.pair, rollout.HeldRevision(b))
		return ctrl.Result{}, terminalIfInvalid(fmt.Errorf("placing the bundle: %w", err))
	}
	s.observePlacementLatency()
	s.r.ledger.noteWritten(s.pair, rollout.HeldRevision(b), time.Now())
	if s.r.ledger.wasPlaced(s.pair, s.placement()) {
		s.heal(ctx, []string{"deleted"})
	}
	s.r.ledger.setPlaced(s.pair, s.placement())
	ctrl.LoggerFrom(ctx).Info("Placed bundle")
	return ctrl.Result{}, nil
}

// createNamespace creates namespace ns in the member, labelled as the hub's, for
// spec.createNamespace; one that exists by now is fine. The hub never deletes it.
func (s *scope) createNamespace(ctx context.Context, ns string) error {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{hubv1alpha1.ManagedByLabel: s.r.opts.FieldOwner}}}
	err := s.member.GetClient().Create(ctx, n, client.FieldOwner(s.r.opts.FieldOwner))
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created namespace", "memberNamespace", ns)
	s.r.recorder.Eventf(s.fb, nil, corev1.EventTypeNormal, hubv1alpha1.NamespaceCreatedEvent, "CreateNamespace",
		"Member %s: created namespace %s (spec.createNamespace)", s.pair.member, ns)
	return nil
}

// update brings the hub's bundle back to its rendering: a heal if it carries the current
// template's hash, revision and render hash (someone else changed it), an update otherwise (a
// new revision, or a change of the member's labels that renders it anew).
func (s *scope) update(ctx context.Context, current *configbundlev1alpha1.ConfigBundle) error {
	drift := Drift(s.want, current)
	if len(drift) == 0 {
		s.r.ledger.setPlaced(s.pair, s.placement())
		return nil
	}
	templateChanged := !sameRendering(current, s.want)
	if templateChanged {
		s.r.ledger.notePlacementDue(s.pair, time.Now())
	}
	b := current.DeepCopy()
	b.Labels, b.Annotations, b.Spec = s.want.Labels, s.want.Annotations, s.want.Spec
	err := s.member.GetClient().Update(ctx, b, client.FieldOwner(s.r.opts.FieldOwner))
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return fmt.Errorf("updating the placed bundle: %w: %w", rollout.ErrStale, err)
	case err != nil:
		s.outcome = failed("updating", err)
		s.r.ledger.noteRefused(s.pair, rollout.HeldRevision(b))
		return terminalIfInvalid(fmt.Errorf("updating the placed bundle: %w", err))
	}
	s.r.ledger.setPlaced(s.pair, s.placement())
	s.r.ledger.noteWritten(s.pair, rollout.HeldRevision(b), time.Now())
	if !templateChanged {
		s.heal(ctx, drift)
	} else {
		s.observePlacementLatency()
		ctrl.LoggerFrom(ctx).Info("Updated placed bundle", "drift", drift)
	}
	return nil
}

// observePlacementLatency observes the placement latency of a write that placed the bundle or
// its new template.
func (s *scope) observePlacementLatency() {
	if latency, ok := s.r.ledger.takePlacementLatency(s.pair, time.Now()); ok {
		placementLatency.WithLabelValues(s.pair.member).Observe(latency.Seconds())
	}
}

// heal counts a heal of the FleetBundle, logs it and records an Event on it naming the member.
func (s *scope) heal(ctx context.Context, what []string) {
	s.healed = what
	s.r.ledger.noteHeal(s.fb.UID)
	ctrl.LoggerFrom(ctx).Info("Healed placed bundle", "drift", what)
	s.r.recorder.Eventf(s.fb, nil, corev1.EventTypeNormal, hubv1alpha1.PlacedBundleHealedEvent, "Heal",
		"Member %s: restored the placed ConfigBundle %s/%s (%s)", s.pair.member, s.fb.Namespace, s.fb.Name, strings.Join(what, ", "))
}

// failed is the outcome of a refused write.
func failed(verb string, err error) Outcome {
	return Outcome{Reason: hubv1alpha1.PlacementFailedReason, Message: fmt.Sprintf("%s the placed ConfigBundle: %v", verb, err)}
}

// terminalIfInvalid makes an Invalid (422) error terminal: retrying cannot help until the
// FleetBundle changes.
func terminalIfInvalid(err error) error {
	if apierrors.IsInvalid(err) {
		return reconcile.TerminalError(err)
	}
	return err
}
