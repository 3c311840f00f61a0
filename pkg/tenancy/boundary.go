package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// A FleetBundle selects only among the members of the ClusterSets bound to its namespace (a
// ClusterSetBinding named after the set), narrowed by its spec.clusterSets: its Boundary. Every
// decision of which members a FleetBundle selects (placement's pairs, the status's counts, the
// rollout's members, the sharded totals) goes through Boundary.Selects.

// Boundary is where a FleetBundle may place: the members of the ClusterSets bound to its
// namespace that exist, narrowed by its spec.clusterSets (the bound sets). The zero Boundary
// binds no set: it selects no member.
type Boundary struct {
	// Namespace is the FleetBundle's namespace.
	Namespace string
	// Bound names the bound sets, sorted.
	Bound []string
	// Missing names the ClusterSetBindings of the namespace whose ClusterSet does not exist,
	// sorted: they add no member.
	Missing []string
	// Unnamed names the sets bound to the namespace that spec.clusterSets leaves out, sorted.
	Unnamed []string
	// Named is the FleetBundle's spec.clusterSets (nil: every bound set).
	Named []string
	// selectors are the selectors of the bound sets whose selector is valid (an invalid one
	// selects no member).
	selectors []labels.Selector
}

// BoundaryOf computes a FleetBundle's Boundary from the ClusterSets of the hub and the
// ClusterSetBindings (those of other namespaces than the FleetBundle's are ignored).
func BoundaryOf(fb *hubv1alpha1.FleetBundle, sets []hubv1alpha1.ClusterSet, bindings []hubv1alpha1.ClusterSetBinding) Boundary {
	b := Boundary{Namespace: fb.Namespace, Named: slices.Clone(fb.Spec.ClusterSets)}
	byName := make(map[string]*hubv1alpha1.ClusterSet, len(sets))
	for i := range sets {
		byName[sets[i].Name] = &sets[i]
	}
	seen := map[string]bool{}
	for _, binding := range bindings {
		name := binding.Spec.ClusterSet
		if binding.Namespace != fb.Namespace || seen[name] {
			continue
		}
		seen[name] = true
		set, ok := byName[name]
		switch {
		case !ok:
			b.Missing = append(b.Missing, name)
		case len(fb.Spec.ClusterSets) > 0 && !slices.Contains(fb.Spec.ClusterSets, name):
			b.Unnamed = append(b.Unnamed, name)
		default:
			b.Bound = append(b.Bound, name)
			if s, err := metav1.LabelSelectorAsSelector(&set.Spec.ClusterSelector); err == nil {
				b.selectors = append(b.selectors, s)
			}
		}
	}
	slices.Sort(b.Bound)
	slices.Sort(b.Missing)
	slices.Sort(b.Unnamed)
	return b
}

// HasBound reports whether at least one set is bound: without one, the FleetBundle is
// NoClusterSetBinding.
func (b Boundary) HasBound() bool { return len(b.Bound) > 0 }

// Contains reports whether a member with these labels is in one of the bound sets (eligible).
func (b Boundary) Contains(memberLabels map[string]string) bool {
	set := labels.Set(memberLabels)
	return slices.ContainsFunc(b.selectors, func(s labels.Selector) bool { return s.Matches(set) })
}

// Selects reports whether a FleetBundle selects a member with these labels: the member is in
// one of its bound sets and its clusterSelector selects it (an absent or invalid one selects
// none).
func (b Boundary) Selects(fb *hubv1alpha1.FleetBundle, memberLabels map[string]string) bool {
	if !b.Contains(memberLabels) {
		return false
	}
	ok, err := fleetbundle.Selects(fb.Spec.ClusterSelector, memberLabels)
	return err == nil && ok
}

// Unbound says why no set is bound, for the NoClusterSetBinding message; "" if one is.
func (b Boundary) Unbound() string {
	if b.HasBound() {
		return ""
	}
	var msg string
	if len(b.Named) > 0 && len(b.Unnamed) > 0 {
		msg = fmt.Sprintf("None of the ClusterSets spec.clusterSets names (%s) is bound to namespace %s (bound there: %s)",
			fleetbundle.ListNames(b.Named), b.Namespace, fleetbundle.ListNames(b.Unnamed))
	} else {
		msg = fmt.Sprintf("No ClusterSet is bound to namespace %s", b.Namespace)
		if len(b.Named) > 0 {
			msg = fmt.Sprintf("No ClusterSet is bound to namespace %s, so none of those spec.clusterSets names (%s)", b.Namespace, fleetbundle.ListNames(b.Named))
		}
	}
	if len(b.Missing) > 0 {
		msg += fmt.Sprintf("; its ClusterSetBindings of %s name no existing ClusterSet", fleetbundle.ListNames(b.Missing))
	}
	return msg + ": no member is selected and nothing is placed; bind a set into the namespace with a ClusterSetBinding (which needs create on " +
		hubv1alpha1.ClusterSetBindPermission + ")"
}

// ReadBoundary reads a FleetBundle's Boundary from the hub (hub: the manager's cache, or a
// client of the hub): the ClusterSetBindings of its namespace and the ClusterSets.
func ReadBoundary(ctx context.Context, hub client.Reader, fb *hubv1alpha1.FleetBundle) (Boundary, error) {
	bindings := &hubv1alpha1.ClusterSetBindingList{}
	if err := hub.List(ctx, bindings, client.InNamespace(fb.Namespace)); err != nil {
		return Boundary{}, fmt.Errorf("listing ClusterSetBindings: %w", err)
	}
	if len(bindings.Items) == 0 {
		return BoundaryOf(fb, nil, nil), nil
	}
	sets := &hubv1alpha1.ClusterSetList{}
	if err := hub.List(ctx, sets); err != nil {
		return Boundary{}, fmt.Errorf("listing ClusterSets: %w", err)
	}
	return BoundaryOf(fb, sets.Items, bindings.Items), nil
}

// namespacesBinding returns the namespaces that bind a ClusterSet (sorted, each once).
func namespacesBinding(ctx context.Context, hub client.Reader, set string) ([]string, error) {
	bindings := &hubv1alpha1.ClusterSetBindingList{}
	if err := hub.List(ctx, bindings); err != nil {
		return nil, fmt.Errorf("listing ClusterSetBindings: %w", err)
	}
	var ns []string
	for _, b := range bindings.Items {
		if b.Spec.ClusterSet == set {
			ns = append(ns, b.Namespace)
		}
	}
	slices.SortFunc(ns, strings.Compare)
	return slices.Compact(ns), nil
}

// FleetBundlesIn returns the FleetBundles of the namespaces ns.
func FleetBundlesIn(ctx context.Context, hub client.Reader, ns ...string) []client.ObjectKey {
	var keys []client.ObjectKey
	for _, n := range ns {
		list := &hubv1alpha1.FleetBundleList{}
		if err := hub.List(ctx, list, client.InNamespace(n)); err != nil {
			continue
		}
		for i := range list.Items {
			keys = append(keys, client.ObjectKeyFromObject(&list.Items[i]))
		}
	}
	return keys
}

// FleetBundlesOfSet returns the FleetBundles that a change of a ClusterSet may move: those of the
// namespaces that bind it.
func FleetBundlesOfSet(ctx context.Context, hub client.Reader, set string) []client.ObjectKey {
	ns, err := namespacesBinding(ctx, hub, set)
	if err != nil {
		return nil
	}
	return FleetBundlesIn(ctx, hub, ns...)
}
