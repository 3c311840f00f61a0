package placement

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFinalizersPatch: the patch that sets a FleetBundle's finalizers carries them and the
// resourceVersion (the optimistic lock), and nothing else: no spec, no other metadata.
func TestFinalizersPatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		finalizers []string
		want       map[string]any
	}{
		{name: "add", finalizers: []string{"other", "hub.configbundle.dev/placement"},
			want: map[string]any{"metadata": map[string]any{"finalizers": []any{"other", "hub.configbundle.dev/placement"}, "resourceVersion": "42"}}},
		{name: "remove the last: null removes the field", finalizers: []string{},
			want: map[string]any{"metadata": map[string]any{"finalizers": nil, "resourceVersion": "42"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := finalizersPatch("42", tc.finalizers)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch %s (-want +got):\n%s", raw, diff)
			}
		})
	}
}
