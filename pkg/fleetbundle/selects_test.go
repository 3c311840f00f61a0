package fleetbundle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSelects(t *testing.T) {
	prod := map[string]string{"env": "prod", "region": "eu"}
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		labels   map[string]string
		want     bool
		wantErr  bool
	}{
		{name: "absent selects none", selector: nil, labels: prod, want: false},
		{name: "empty selects every member", selector: &metav1.LabelSelector{}, labels: nil, want: true},
		{name: "matchLabels matches", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, labels: prod, want: true},
		{name: "matchLabels differs", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, labels: prod, want: false},
		{name: "expression In", selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"eu", "us"}}}}, labels: prod, want: true},
		{name: "expression DoesNotExist", selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist}}}, labels: prod, want: false},
		{name: "invalid operator", selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: "Near"}}}, labels: prod, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Selects(tc.selector, tc.labels)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Selects = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
