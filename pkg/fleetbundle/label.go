package fleetbundle

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// LabelValue is the value of FleetBundleLabel on the bundles a FleetBundle places:
// "<namespace>.<name>". A namespace holds no dot, so the value names one FleetBundle.
func LabelValue(fb types.NamespacedName) string {
	return fb.Namespace + "." + fb.Name
}

// KeyOf is the FleetBundle a FleetBundleLabel value names, and false if it names none.
func KeyOf(value string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(value, ".")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// LabelFits reports whether a FleetBundle's FleetBundleLabel value fits in a label value.
func LabelFits(fb types.NamespacedName) bool {
	return len(LabelValue(fb)) <= hubv1alpha1.MaxFleetBundleLabelValue
}
