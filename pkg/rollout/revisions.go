package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/template"
)

// Every distinct definition (template, templateEngine, overrides, dataFrom and what its sources
// hold) of a FleetBundle is a revision, numbered 1, 2, 3... in the order the
// hub first sees them, and kept as an apps/v1 ControllerRevision "<fleetbundle>-<revision>" in
// the FleetBundle's namespace, controller-owned by it (the garbage collector removes them with
// it), labelled FleetBundleLabel, its .data the Definition.

// ErrStale marks a write the API server refused because the hub acted on a state that is no
// longer there (409 Conflict, AlreadyExists, NotFound on an update or a delete): the pair is
// converged once more on a live read.
var ErrStale = errors.New("acted on a stale read")

// Revision is one revision of a FleetBundle's definition.
type Revision struct {
	// Number is the revision's number (ControllerRevision .revision).
	Number int64
	// template.Definition is the definition.
	Definition template.Definition
	// Hash is TemplateHash of Definition.
	Hash string
	// Name and UID are those of its ControllerRevision.
	Name string
	UID  types.UID
	// Size is the size of its stored definition (the ControllerRevision's .data), in bytes.
	Size int
}

// RevisionName is the name of the ControllerRevision of a FleetBundle's revision.
func RevisionName(fleetBundle string, revision int64) string {
	return fleetBundle + "-" + strconv.FormatInt(revision, 10)
}

// RevisionOf decodes a FleetBundle's revision from its ControllerRevision.
func RevisionOf(cr *appsv1.ControllerRevision) (Revision, error) {
	r := Revision{Number: cr.Revision, Name: cr.Name, UID: cr.UID, Size: len(cr.Data.Raw)}
	if err := json.Unmarshal(cr.Data.Raw, &r.Definition); err != nil {
		return Revision{}, fmt.Errorf("decoding the definition of ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	r.Hash = template.Hash(&r.Definition)
	return r, nil
}

// ownedBy reports whether the FleetBundle of uid controls the object.
func ownedBy(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == uid
}

// ListRevisions returns a FleetBundle's revisions, by number. A ControllerRevision of an
// earlier FleetBundle of the same name (another uid; the garbage collector removes it) or one
// that does not decode is not one of them.
func ListRevisions(ctx context.Context, reader client.Reader, fb *hubv1alpha1.FleetBundle) ([]Revision, error) {
	list := &appsv1.ControllerRevisionList{}
	// Read, never changed: a cache need not copy definitions of up to a MiB each.
	err := reader.List(ctx, list, client.InNamespace(fb.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingLabels{hubv1alpha1.FleetBundleLabel: fleetbundle.LabelValue(client.ObjectKeyFromObject(fb))})
	if err != nil {
		return nil, fmt.Errorf("listing the FleetBundle's ControllerRevisions: %w", err)
	}
	revs := make([]Revision, 0, len(list.Items))
	for i := range list.Items {
		if !ownedBy(&list.Items[i], fb.UID) {
			continue
		}
		if r, err := RevisionOf(&list.Items[i]); err == nil {
			revs = append(revs, r)
		}
	}
	slices.SortFunc(revs, func(a, b Revision) int { return int(a.Number - b.Number) })
	return revs, nil
}

// RevisionOfTemplate returns the revision of a FleetBundle's definition d (ResolveDefinition)
// among revs, and false if it has none yet.
func RevisionOfTemplate(d *template.Definition, revs []Revision) (Revision, bool) {
	hash := template.Hash(d)
	for _, r := range revs {
		if r.Hash == hash {
			return r, true
		}
	}
	return Revision{}, false
}

// HighestRevision is the highest revision number issued for a FleetBundle: its
// status.observedRevision, or higher if a revision kept or named by its status is (one created
// before its status could record it).
func HighestRevision(fb *hubv1alpha1.FleetBundle, revs []Revision) int64 {
	n := max(fb.Status.ObservedRevision, fb.Status.UpdateRevision, fb.Status.CurrentRevision)
	if fb.Status.Rollout != nil {
		n = max(n, fb.Status.Rollout.FailedRevision)
	}
	for _, r := range revs {
		n = max(n, r.Number)
	}
	return n
}

// nextRevision is the number of a FleetBundle's next revision: above every number issued, so
// that none is used twice.
func nextRevision(fb *hubv1alpha1.FleetBundle, revs []Revision) int64 {
	return HighestRevision(fb, revs) + 1
}

// newControllerRevision is the ControllerRevision of a FleetBundle's definition d as revision n.
func newControllerRevision(fb *hubv1alpha1.FleetBundle, d *template.Definition, n int64, fieldOwner string) (*appsv1.ControllerRevision, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding the definition: %w", err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: RevisionName(fb.Name, n), Namespace: fb.Namespace,
			Labels: map[string]string{
				hubv1alpha1.FleetBundleLabel: fleetbundle.LabelValue(client.ObjectKeyFromObject(fb)),
				hubv1alpha1.ManagedByLabel:   fieldOwner,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(fb, hubv1alpha1.GroupVersion.WithKind("FleetBundle"))},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: n,
	}, nil
}

// EnsureRevision returns the revision of the FleetBundle's definition d (ResolveDefinition),
// creating its ControllerRevision if it has none, and the revisions with it.
func EnsureRevision(ctx context.Context, c client.Client, fb *hubv1alpha1.FleetBundle, d *template.Definition, revs []Revision, fieldOwner string) (Revision, []Revision, error) {
	if r, ok := RevisionOfTemplate(d, revs); ok {
		return r, revs, ensureSnapshot(ctx, c, fb, r, d, fieldOwner)
	}
	cr, err := newControllerRevision(fb, d, nextRevision(fb, revs), fieldOwner)
	if err != nil {
		return Revision{}, nil, err
	}
	if err := c.Create(ctx, cr, client.FieldOwner(fieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return Revision{}, nil, fmt.Errorf("creating ControllerRevision %s: %w: %w", cr.Name, ErrStale, err)
		}
		return Revision{}, nil, fmt.Errorf("creating ControllerRevision %s: %w", cr.Name, err)
	}
	r, err := RevisionOf(cr)
	if err != nil {
		return Revision{}, nil, err
	}
	return r, append(revs, r), ensureSnapshot(ctx, c, fb, r, d, fieldOwner)
}

// PruneRevisions deletes the revisions Prunable names.
func PruneRevisions(ctx context.Context, c client.Client, fb *hubv1alpha1.FleetBundle, revs []Revision, held map[int64]bool) error {
	for _, r := range Prunable(fb, revs, held) {
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: fb.Namespace}}
		if err := c.Delete(ctx, cr, client.Preconditions{UID: &r.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting ControllerRevision %s: %w", r.Name, err)
		}
	}
	return nil
}

// Prunable returns the revisions of revs (sorted, the oldest first) that are no longer kept: the
// oldest not in use beyond spec.revisionHistoryLimit, then, while the definitions of those left
// exceed MaxRevisionHistoryBytes, the oldest left not in use. In use are the status's
// currentRevision, updateRevision, failedRevision and heldRevisions, the revision of
// spec.dataFromRevision, and the revisions of held:
// none of them is ever pruned.
func Prunable(fb *hubv1alpha1.FleetBundle, revs []Revision, held map[int64]bool) []Revision {
	limit := int32(hubv1alpha1.DefaultRevisionHistoryLimit)
	if fb.Spec.RevisionHistoryLimit != nil {
		limit = min(max(*fb.Spec.RevisionHistoryLimit, 0), hubv1alpha1.MaxRevisionHistoryLimit)
	}
	ro := fb.Status.Rollout
	inUse := func(n int64) bool {
		return held[n] || (fb.Spec.DataFromRevision != nil && n == fb.Spec.DataFromRevision.Revision) || n == fb.Status.CurrentRevision || n == fb.Status.UpdateRevision || (ro != nil && n == ro.FailedRevision) ||
			slices.Contains(fb.Status.HeldRevisions, n)
	}
	var spare []Revision
	size := 0
	for _, r := range revs {
		size += r.Size
		if !inUse(r.Number) {
			spare = append(spare, r)
		}
	}
	n := max(len(spare)-int(limit), 0)
	for _, r := range spare[:n] {
		size -= r.Size
	}
	for ; n < len(spare) && size > hubv1alpha1.MaxRevisionHistoryBytes; n++ {
		size -= spare[n].Size
	}
	return spare[:n]
}

// RecordHeld is what a FleetBundle's status.heldRevisions records of the revisions members hold
// (held): sorted, the highest MaxHeldRevisions.
func RecordHeld(held map[int64]bool) []int64 {
	var out []int64
	for n, ok := range held {
		if ok && n > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out[max(len(out)-hubv1alpha1.MaxHeldRevisions, 0):]
}

// ReadRevision reads revision n of a FleetBundle from the hub's cache.
func ReadRevision(ctx context.Context, reader client.Reader, fb *hubv1alpha1.FleetBundle, n int64) (*Revision, error) {
	cr := &appsv1.ControllerRevision{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: fb.Namespace, Name: RevisionName(fb.Name, n)}, cr); err != nil {
		return nil, fmt.Errorf("reading revision %d: %w", n, err)
	}
	if !ownedBy(cr, fb.UID) || cr.Revision != n {
		return nil, fmt.Errorf("reading revision %d: ControllerRevision %s is not the FleetBundle's: %w", n, cr.Name, ErrStale)
	}
	r, err := RevisionOf(cr)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// HeldRevision is the revision a placed bundle was written from, 0 if it says none.
func HeldRevision(b *configbundlev1alpha1.ConfigBundle) int64 {
	if b == nil {
		return 0
	}
	n, err := strconv.ParseInt(b.Annotations[hubv1alpha1.FleetBundleRevisionAnnotation], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// RevisionCacheOptions restricts a hub manager's cache of ControllerRevisions to those of
// FleetBundles (labelled FleetBundleLabel): the hub reads no other.
func RevisionCacheOptions(opts *cache.Options) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	selector, err := labels.NewRequirement(hubv1alpha1.FleetBundleLabel, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("the selector of FleetBundle revisions: %v", err)) // a constant key cannot be invalid
	}
	opts.ByObject[&appsv1.ControllerRevision{}] = cache.ByObject{Label: labels.NewSelector().Add(*selector)}
}
