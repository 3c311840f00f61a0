package configbundle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDifferingKeys: the keys a takeOver IfNoDiff conflict names, sorted: changed, missing and
// extra data keys, and every binaryData key.
func TestDifferingKeys(t *testing.T) {
	desired := &corev1.ConfigMap{Data: map[string]string{"message": "m", "port": "80", "tls": "on"}}
	for _, tc := range []struct {
		name   string
		actual *corev1.ConfigMap
		want   []string
	}{
		{name: "equal", actual: &corev1.ConfigMap{Data: map[string]string{"message": "m", "port": "80", "tls": "on"}}},
		{name: "changed, missing and extra", actual: &corev1.ConfigMap{Data: map[string]string{"message": "m", "port": "8080", "extra": "x"}},
			want: []string{"extra", "port", "tls"}},
		{name: "no data", actual: &corev1.ConfigMap{}, want: []string{"message", "port", "tls"}},
		{name: "binaryData", actual: &corev1.ConfigMap{Data: desired.Data, BinaryData: map[string][]byte{"blob": {1}}},
			want: []string{"binaryData.blob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, differingKeys(desired, tc.actual)); diff != "" {
				t.Errorf("differingKeys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFieldManagers: the previous writers a TakenOver Event names, oldest first, the hub's own
// entries left out.
func TestFieldManagers(t *testing.T) {
	at := func(s int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 12, 6, 21, 40, s, 0, time.UTC)} }
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(3)},
		{Manager: DefaultFieldOwner, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(4)},
		{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(1)},
		{Manager: "argocd", Operation: metav1.ManagedFieldsOperationApply},
	}}}
	want := []string{"argocd Apply", "kubectl-create Update 2026-12-06T21:40:01Z", "kubectl-edit Update 2026-12-06T21:40:03Z"}
	if diff := cmp.Diff(want, fieldManagers(cm, DefaultFieldOwner)); diff != "" {
		t.Errorf("fieldManagers (-want +got):\n%s", diff)
	}
}
