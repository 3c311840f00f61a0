package fleetbundle

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestLabelValueAndKeyOf(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "web.v2"}
	if got, ok := KeyOf(LabelValue(key)); !ok || got != key {
		t.Errorf("KeyOf(LabelValue(%v)) = %v, %v", key, got, ok)
	}
	for _, v := range []string{"", "nodot", ".name", "ns."} {
		if _, ok := KeyOf(v); ok {
			t.Errorf("KeyOf(%q) names a FleetBundle", v)
		}
	}
	fits := types.NamespacedName{Namespace: "ns", Name: string(make([]byte, 60))}
	if !LabelFits(fits) {
		t.Errorf("a 63-character value does not fit")
	}
	fits.Name += "x"
	if LabelFits(fits) {
		t.Errorf("a 64-character value fits")
	}
}
