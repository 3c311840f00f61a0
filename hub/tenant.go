package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/tenancy"
)

// readPlacementView reads what fb's placement depends on: its Boundary (the ClusterSets bound to
// its namespace) and the MemberClusters. A tenant who may not read ClusterSets and
// MemberClusters (the FleetBundle editor role, bound in its namespace) gets both from the
// namespace's ClusterSetBindings, whose status lists the members of their sets by name and
// labels (tenantView).
func readPlacementView(ctx context.Context, c client.Reader, fb *hubv1alpha1.FleetBundle) (tenancy.Boundary, []hubv1alpha1.MemberCluster, error) {
	boundary, err := tenancy.ReadBoundary(ctx, c, fb)
	if err == nil {
		list := &hubv1alpha1.MemberClusterList{}
		if err = c.List(ctx, list); err == nil {
			return boundary, list.Items, nil
		}
		err = fmt.Errorf("listing MemberClusters: %w", err)
	}
	if !apierrors.IsForbidden(err) {
		return tenancy.Boundary{}, nil, err
	}
	return tenantView(ctx, c, fb)
}

// tenantView is readPlacementView from the ClusterSetBindings of fb's namespace alone: a bound
// set (Ready, Bound) stands for a set that selects the members its binding lists; its members are
// MemberClusters with a name and labels, nothing else.
func tenantView(ctx context.Context, c client.Reader, fb *hubv1alpha1.FleetBundle) (tenancy.Boundary, []hubv1alpha1.MemberCluster, error) {
	bindings := &hubv1alpha1.ClusterSetBindingList{}
	if err := c.List(ctx, bindings, client.InNamespace(fb.Namespace)); err != nil {
		return tenancy.Boundary{}, nil, fmt.Errorf("listing the ClusterSetBindings of namespace %s: %w", fb.Namespace, err)
	}
	var sets []hubv1alpha1.ClusterSet
	for _, b := range bindings.Items {
		if meta.IsStatusConditionTrue(b.Status.Conditions, hubv1alpha1.ReadyCondition) {
			sets = append(sets, hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: b.Spec.ClusterSet}})
		}
	}
	boundary := tenancy.BoundaryOf(fb, sets, bindings.Items)
	var members []hubv1alpha1.MemberCluster
	seen := map[string]bool{}
	for _, b := range bindings.Items {
		if !slices.Contains(boundary.Bound, b.Spec.ClusterSet) {
			continue
		}
		if int(b.Status.ClusterCount) > len(b.Status.Clusters) {
			return tenancy.Boundary{}, nil, fmt.Errorf("ClusterSetBinding %s/%s lists %d of the %d members of its set: ask a fleet administrator",
				b.Namespace, b.Name, len(b.Status.Clusters), b.Status.ClusterCount)
		}
		for _, m := range b.Status.Clusters {
			if !seen[m.Name] {
				seen[m.Name] = true
				members = append(members, hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels}})
			}
		}
	}
	slices.SortFunc(members, func(a, b hubv1alpha1.MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	return boundary, members, nil
}

// readMembers lists the MemberClusters; hidden, and none, if the reader may not (a tenant).
func readMembers(ctx context.Context, c client.Reader) (members []hubv1alpha1.MemberCluster, hidden bool, err error) {
	list := &hubv1alpha1.MemberClusterList{}
	switch err := c.List(ctx, list); {
	case apierrors.IsForbidden(err):
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("listing MemberClusters: %w", err)
	}
	return list.Items, false, nil
}

// readFleetBundles lists the FleetBundles of all namespaces; a reader who may not (a tenant) but
// chose FleetBundles gets those (the absent ones left out).
func readFleetBundles(ctx context.Context, c client.Reader, chosen []types.NamespacedName) ([]hubv1alpha1.FleetBundle, error) {
	list := &hubv1alpha1.FleetBundleList{}
	err := c.List(ctx, list)
	if err == nil {
		return list.Items, nil
	}
	if !apierrors.IsForbidden(err) || len(chosen) == 0 {
		return nil, fmt.Errorf("listing FleetBundles: %w", err)
	}
	var bundles []hubv1alpha1.FleetBundle
	for _, key := range chosen {
		fb := &hubv1alpha1.FleetBundle{}
		if err := c.Get(ctx, key, fb); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading FleetBundle %s: %w", key, err)
		}
		bundles = append(bundles, *fb)
	}
	return bundles, nil
}

// printHidden says that the members are not shown to a reader who may not list them.
func printHidden(out io.Writer, st *hubState) {
	if st.membersHidden {
		fmt.Fprintln(out, "(members not shown: you may not list MemberClusters; kubectl get clustersetbindings -o yaml lists those of your namespace)")
	}
}
