package configbundle

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

func TestDriftFields(t *testing.T) {
	t.Parallel()
	desired := DesiredConfigMap(testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
		b.Labels = map[string]string{"app": "web"}
		b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"keep": "1", "gone": "2", "edit": "3"}
	}))
	tests := []struct {
		name   string
		tamper func(*corev1.ConfigMap)
		want   []string
	}{
		{"none", func(*corev1.ConfigMap) {}, nil},
		{"data keys added, removed and changed, sorted by key", func(cm *corev1.ConfigMap) {
			cm.Data["new"] = "x"
			delete(cm.Data, "gone")
			cm.Data["edit"] = "changed"
			cm.Data["message"] = "tampered"
		}, []string{"data.edit changed", "data.gone removed", "data.message changed", "data.new added"}},
		{"labels and annotations", func(cm *corev1.ConfigMap) {
			cm.Labels = nil
			cm.Annotations = map[string]string{"by-hand": "1"}
		}, []string{DriftLabels, DriftAnnotations}},
		{"the ownerReference", func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil }, []string{DriftOwnerReferences}},
		{"immutable and binaryData", func(cm *corev1.ConfigMap) {
			cm.Immutable = ptr.To(true)
			cm.BinaryData = map[string][]byte{"b": {1}}
		}, []string{DriftBinaryData, DriftImmutable}},
		{"a long list is bounded", func(cm *corev1.ConfigMap) {
			for i := range 40 {
				cm.Data[strings.Repeat("k", i+1)] = "x"
			}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			actual := desired.DeepCopy()
			tt.tamper(actual)
			got := DriftFields(desired, actual)
			if tt.name == "a long list is bounded" {
				if len(got) != configbundlev1alpha1.MaxDriftFields || got[len(got)-1] != "and 9 more" {
					t.Errorf("DriftFields() = %d fields ending %q, want %d ending \"and 9 more\"", len(got), got[len(got)-1], configbundlev1alpha1.MaxDriftFields)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DriftFields() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChangedBy(t *testing.T) {
	t.Parallel()
	at := func(sec int) *metav1.Time {
		ts := metav1.NewTime(time.Date(2026, 12, 6, 21, 40, sec, 0, time.UTC))
		return &ts
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType, when *metav1.Time, fields string) metav1.ManagedFieldsEntry {
		e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: when}
		if fields != "" {
			e.FieldsType, e.FieldsV1 = "FieldsV1", metav1.NewFieldsV1(fields)
		}
		return e
	}
	const hub = "configbundle-hub"
	update, apply := metav1.ManagedFieldsOperationUpdate, metav1.ManagedFieldsOperationApply
	hubEntry := entry(hub, update, at(0), "")
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		fields  []string
		want    string
	}{
		{"the manager that owns the changed key", []metav1.ManagedFieldsEntry{
			hubEntry, entry("kubectl-edit", update, at(3), `{"f:data":{"f:message":{}}}`),
		}, []string{"data.message changed"}, "kubectl-edit Update 2026-12-06T21:40:03Z"},
		{"only the owners of drifted fields, oldest first", []metav1.ManagedFieldsEntry{
			hubEntry,
			entry("deployer", apply, at(9), `{"f:metadata":{"f:labels":{"f:team":{}}}}`),
			entry("kubectl-edit", update, at(3), `{"f:data":{"f:added":{}}}`),
			entry("bystander", update, at(5), `{"f:data":{"f:other":{}}}`),
		}, []string{"data.added added", DriftLabels}, "kubectl-edit Update 2026-12-06T21:40:03Z, deployer Apply 2026-12-06T21:40:09Z"},
		{"a removal nobody owns: who wrote after the hub", []metav1.ManagedFieldsEntry{
			entry("earlier", update, at(0), `{"f:data":{"f:x":{}}}`),
			entry(hub, update, at(2), ""),
			entry("kubectl-edit", update, at(4), `{"f:metadata":{"f:annotations":{}}}`),
		}, []string{"data.gone removed"}, "kubectl-edit Update 2026-12-06T21:40:04Z"},
		{"the ownerReference removed", []metav1.ManagedFieldsEntry{
			hubEntry, entry("kubectl-patch", update, at(7), `{"f:metadata":{"f:labels":{}}}`),
		}, []string{DriftOwnerReferences}, "kubectl-patch Update 2026-12-06T21:40:07Z"},
		{"the hub's own entry never names anyone", []metav1.ManagedFieldsEntry{
			entry(hub, update, at(0), `{"f:data":{"f:message":{}}}`),
		}, []string{"data.message changed"}, "unknown"},
		{"a status subresource entry is no change of the ConfigMap", []metav1.ManagedFieldsEntry{
			hubEntry, {Manager: "other", Operation: update, Time: at(8), Subresource: "status"},
		}, []string{"data.message changed"}, "unknown"},
		{"deleted", nil, []string{DriftDeleted}, configbundlev1alpha1.ChangedByDeleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ChangedBy(tt.entries, tt.fields, hub); got != tt.want {
				t.Errorf("ChangedBy() = %q, want %q", got, tt.want)
			}
		})
	}
}
