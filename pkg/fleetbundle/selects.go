package fleetbundle

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selects reports whether a FleetBundle's selector selects a member with these labels, with
// Kubernetes semantics: an absent selector selects none, an empty one every member.
func Selects(selector *metav1.LabelSelector, memberLabels map[string]string) (bool, error) {
	if selector == nil {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, fmt.Errorf("invalid clusterSelector: %w", err)
	}
	return s.Matches(labels.Set(memberLabels)), nil
}
