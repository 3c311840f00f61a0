package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/tenancy"
)

// pausedIn is a FleetBundle that selects paused members (status.clusters.paused), which
// placement writes nothing to: the revisions they may hold back.
type pausedIn struct {
	bundle types.NamespacedName
	// current is the FleetBundle's current revision: its currentRevision, or its updateRevision
	// before a rollout completed.
	current int64
	// older are the revisions members hold that are older than current (status.heldRevisions):
	// with paused members selected, the paused hold them back. Sorted.
	older []int64
	// paused are the paused members it selects, sorted.
	paused []string
}

// heldBack reports whether paused members hold the FleetBundle back on older revisions.
func (p pausedIn) heldBack() bool { return len(p.older) > 0 }

// readPausedIn finds the FleetBundles of st that select paused members, reading the ClusterSets
// and ClusterSetBindings to know which paused members each selects; it reads nothing when no
// FleetBundle counts a paused member.
func readPausedIn(ctx context.Context, c client.Reader, st *hubState) ([]pausedIn, error) {
	if !slices.ContainsFunc(st.bundles, func(fb hubv1alpha1.FleetBundle) bool { return fb.Status.Clusters.Paused > 0 }) {
		return nil, nil
	}
	sets := &hubv1alpha1.ClusterSetList{}
	if err := c.List(ctx, sets); apierrors.IsForbidden(err) {
		return nil, nil // a tenant: which paused members, it may not know
	} else if err != nil {
		return nil, fmt.Errorf("listing ClusterSets: %w", err)
	}
	bindings := &hubv1alpha1.ClusterSetBindingList{}
	if err := c.List(ctx, bindings); err != nil {
		return nil, fmt.Errorf("listing ClusterSetBindings: %w", err)
	}
	return pausedInBundles(st.bundles, st.members, sets.Items, bindings.Items), nil
}

// pausedInBundles returns the FleetBundles that select paused members, sorted by namespace and
// name.
func pausedInBundles(bundles []hubv1alpha1.FleetBundle, members []hubv1alpha1.MemberCluster, sets []hubv1alpha1.ClusterSet, bindings []hubv1alpha1.ClusterSetBinding) []pausedIn {
	var out []pausedIn
	for i := range bundles {
		fb := &bundles[i]
		if fb.Status.Clusters.Paused == 0 {
			continue
		}
		p := pausedIn{bundle: client.ObjectKeyFromObject(fb), current: fb.Status.CurrentRevision}
		if p.current == 0 {
			p.current = fb.Status.UpdateRevision
		}
		for _, r := range fb.Status.HeldRevisions {
			if r < p.current {
				p.older = append(p.older, r)
			}
		}
		boundary := tenancy.BoundaryOf(fb, sets, bindings)
		for _, mc := range members {
			if mc.Spec.Paused && boundary.Selects(fb, mc.Labels) {
				p.paused = append(p.paused, mc.Name)
			}
		}
		if len(p.paused) > 0 {
			slices.Sort(p.paused)
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b pausedIn) int { return strings.Compare(a.bundle.String(), b.bundle.String()) })
	return out
}

// heldBack returns the FleetBundles that paused members hold back, among the chosen ones (all
// without chosen ones).
func heldBack(st *hubState, chosen []types.NamespacedName) []pausedIn {
	var out []pausedIn
	for _, p := range st.pausedIn {
		if p.heldBack() && (len(chosen) == 0 || slices.Contains(chosen, p.bundle)) {
			out = append(out, p)
		}
	}
	return out
}

// printPaused names the members paused for maintenance and, below, the FleetBundles they hold
// back with the revisions held and the current one.
func printPaused(out io.Writer, st *hubState, chosen []types.NamespacedName) {
	paused := pausedMembers(st.members)
	if len(paused) == 0 {
		return
	}
	fmt.Fprintf(out, "\nPaused for maintenance (placement writes nothing to them until hub resume): %s\n", strings.Join(paused, ", "))
	for _, h := range heldBack(st, chosen) {
		fmt.Fprintf(out, "  FleetBundle %s held back: paused %s; %s older than current revision %d\n",
			h.bundle, strings.Join(h.paused, ", "), revisionsHeld(h.older), h.current)
	}
}

// revisionsHeld says which revisions are held: "revision 1 held" or "revisions 1, 2 held".
func revisionsHeld(revs []int64) string {
	s := make([]string, len(revs))
	for i, r := range revs {
		s[i] = fmt.Sprint(r)
	}
	if len(s) == 1 {
		return "revision " + s[0] + " held"
	}
	return "revisions " + strings.Join(s, ", ") + " held"
}

// pausedSummary completes the closing line of hub status: "" when no member in question is
// paused, else which are and what they hold back.
func pausedSummary(st *hubState, chosen []types.NamespacedName) string {
	paused := pausedInQuestion(st, chosen)
	if len(paused) == 0 {
		return ""
	}
	s := "; paused: " + strings.Join(paused, ", ")
	if held := heldBack(st, chosen); len(held) > 0 {
		names := make([]string, len(held))
		for i, h := range held {
			names[i] = h.bundle.String()
		}
		s += ", holding back " + strings.Join(names, ", ") + " on older revisions"
	}
	return s
}

// pausedInQuestion names the paused members: every one, or with chosen FleetBundles those they
// select.
func pausedInQuestion(st *hubState, chosen []types.NamespacedName) []string {
	if len(chosen) == 0 {
		return pausedMembers(st.members)
	}
	var names []string
	for _, p := range st.pausedIn {
		if slices.Contains(chosen, p.bundle) {
			names = append(names, p.paused...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// failOnPaused is --fail-on-paused: an error naming the paused members in question and what
// they hold back, if any is paused.
func failOnPaused(st *hubState, chosen []types.NamespacedName) error {
	paused := pausedInQuestion(st, chosen)
	if len(paused) == 0 {
		return nil
	}
	err := "--fail-on-paused: paused: " + strings.Join(paused, ", ")
	for _, h := range heldBack(st, chosen) {
		err += fmt.Sprintf("; FleetBundle %s: %s older than current revision %d", h.bundle, revisionsHeld(h.older), h.current)
	}
	return errors.New(err)
}
