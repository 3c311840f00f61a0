package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestStatusMentionsUnownedMembers: `hub status` says how many members no live replica manages
// (the Fleet's status.clusters.unowned), and says nothing of it when none is.
func TestStatusMentionsUnownedMembers(t *testing.T) {
	for _, tc := range []struct {
		unowned int32
		want    string
	}{
		{2, "\nUnowned: 2 of 3 members are managed by no live hub replica"},
		{0, ""},
	} {
		fleet := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName},
			Status: hubv1alpha1.FleetStatus{Clusters: hubv1alpha1.ClusterCounts{Total: 3, Ready: 1, Unowned: tc.unowned}}}
		var out strings.Builder
		printStatus(&out, &hubState{fleet: fleet}, nil, time.Now())
		switch got := out.String(); {
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("unowned %d: hub status printed\n%s\nwant it to say %q", tc.unowned, got, tc.want)
		case tc.want == "" && strings.Contains(got, "Unowned"):
			t.Errorf("unowned 0: hub status printed\n%s\nwant no word of unowned members", got)
		}
	}
}
