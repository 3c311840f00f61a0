package fleet

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// FleetBundleReady reports whether a FleetBundle is Ready for its current spec: its Ready
// condition is True and its status was computed for its generation. The Fleet counts it in
// status.fleetBundles.ready, and `hub status --fleet-bundle` passes on it.
func FleetBundleReady(fb *hubv1alpha1.FleetBundle) bool {
	c := meta.FindStatusCondition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue && fb.Status.ObservedGeneration == fb.Generation
}

// FleetBundleFailed returns the Ready reason of a FleetBundle that has failed: its Ready
// condition is False with a reason other than Progressing (still on its way) and
// NoClustersSelected (nothing to place is no failure), so ClustersFailed, InvalidSelector,
// InvalidTemplate, NameTooLong, RolloutHalted or RolledBack. It returns "" for one that has not failed. The Fleet counts it in
// status.fleetBundles.failed, and `hub status` fails on it.
func FleetBundleFailed(fb *hubv1alpha1.FleetBundle) string {
	c := meta.FindStatusCondition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
	if c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason == hubv1alpha1.ProgressingReason || c.Reason == hubv1alpha1.NoClustersSelectedReason {
		return ""
	}
	return c.Reason
}

// FailingFleetBundles returns the FleetBundles that have failed (FleetBundleFailed), sorted by
// namespace and name.
func FailingFleetBundles(bundles []hubv1alpha1.FleetBundle) []hubv1alpha1.FleetBundle {
	var failing []hubv1alpha1.FleetBundle
	for _, fb := range bundles {
		if FleetBundleFailed(&fb) != "" {
			failing = append(failing, fb)
		}
	}
	slices.SortFunc(failing, func(a, b hubv1alpha1.FleetBundle) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return failing
}

// CountFleetBundles counts FleetBundles as the Fleet's status.fleetBundles does.
func CountFleetBundles(bundles []hubv1alpha1.FleetBundle) hubv1alpha1.FleetBundleCounts {
	counts := hubv1alpha1.FleetBundleCounts{Total: int64(len(bundles))}
	for _, fb := range bundles {
		switch {
		case FleetBundleReady(&fb):
			counts.Ready++
		case FleetBundleFailed(&fb) != "":
			counts.Failed++
		}
	}
	return counts
}

// failedFleetBundleNames names the FleetBundles that have failed as "namespace/name (reason)",
// sorted.
func failedFleetBundleNames(bundles []hubv1alpha1.FleetBundle) []string {
	var names []string
	for _, fb := range FailingFleetBundles(bundles) {
		names = append(names, fmt.Sprintf("%s/%s (%s)", fb.Namespace, fb.Name, FleetBundleFailed(&fb)))
	}
	return names
}
