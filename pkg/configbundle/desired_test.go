package configbundle

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

func testBundle(mutate ...func(*configbundlev1alpha1.ConfigBundle)) *configbundlev1alpha1.ConfigBundle {
	b := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", UID: "b-uid"},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: "hello"},
	}
	for _, m := range mutate {
		m(b)
	}
	return b
}

func TestDesiredConfigMap(t *testing.T) {
	wantOwner := []metav1.OwnerReference{{
		APIVersion: "configbundle.dev/v1alpha1", Kind: "ConfigBundle", Name: "web", UID: "b-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	tests := []struct {
		name   string
		bundle *configbundlev1alpha1.ConfigBundle
		want   *corev1.ConfigMap
	}{{
		name:   "plain bundle",
		bundle: testBundle(),
		want: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", OwnerReferences: wantOwner},
			Data:       map[string]string{"message": "hello"},
			Immutable:  ptr.To(false),
		},
	}, {
		name: "immutable, labels and annotations but the last-applied record",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Spec.Immutable = true
			b.Labels = map[string]string{"app": "web", "tier": "front"}
			b.Annotations = map[string]string{"note": "x", lastAppliedAnnotation: "{}"}
		}),
		want: &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web", Namespace: "team-a", OwnerReferences: wantOwner,
				Labels:      map[string]string{"app": "web", "tier": "front"},
				Annotations: map[string]string{"note": "x"},
			},
			Data:      map[string]string{"message": "hello"},
			Immutable: ptr.To(true),
		},
	}, {
		name: "only the last-applied record: no annotations at all",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Annotations = map[string]string{lastAppliedAnnotation: "{}"}
		}),
		want: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", OwnerReferences: wantOwner},
			Data:       map[string]string{"message": "hello"},
			Immutable:  ptr.To(false),
		},
	}, {
		name:   "empty message is published as empty",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "" }),
		want: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", OwnerReferences: wantOwner},
			Data:       map[string]string{"message": ""},
			Immutable:  ptr.To(false),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DesiredConfigMap(tt.bundle)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DesiredConfigMap() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("does not alias the bundle's maps", func(t *testing.T) {
		b := testBundle(func(b *configbundlev1alpha1.ConfigBundle) { b.Labels = map[string]string{"a": "1"} })
		DesiredConfigMap(b).Labels["a"] = "changed"
		if b.Labels["a"] != "1" {
			t.Errorf("bundle labels changed through the desired ConfigMap")
		}
	})
}

func TestDrift(t *testing.T) {
	bundle := testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
		b.Labels = map[string]string{"app": "web"}
		b.Annotations = map[string]string{"note": "x"}
	})
	desired := DesiredConfigMap(bundle)
	tests := []struct {
		name   string
		mutate func(*corev1.ConfigMap)
		want   []string
	}{
		{name: "in sync", mutate: func(*corev1.ConfigMap) {}},
		{name: "nil and false immutable are equal", mutate: func(cm *corev1.ConfigMap) { cm.Immutable = nil }},
		{name: "other namespace", mutate: func(cm *corev1.ConfigMap) { cm.Namespace = "other" }, want: []string{DriftNamespace}},
		{name: "label changed", mutate: func(cm *corev1.ConfigMap) { cm.Labels["app"] = "db" }, want: []string{DriftLabels}},
		{name: "label added", mutate: func(cm *corev1.ConfigMap) { cm.Labels["extra"] = "1" }, want: []string{DriftLabels}},
		{name: "labels removed", mutate: func(cm *corev1.ConfigMap) { cm.Labels = nil }, want: []string{DriftLabels}},
		{name: "annotation added", mutate: func(cm *corev1.ConfigMap) { cm.Annotations["by-hand"] = "1" }, want: []string{DriftAnnotations}},
		{name: "owner removed", mutate: func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil }, want: []string{DriftOwnerReferences}},
		{name: "owner no longer controller", mutate: func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].Controller = nil }, want: []string{DriftOwnerReferences}},
		{name: "second owner", mutate: func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p"})
		}, want: []string{DriftOwnerReferences}},
		{name: "message changed", mutate: func(cm *corev1.ConfigMap) { cm.Data["message"] = "tampered" }, want: []string{DriftData}},
		{name: "stray data key", mutate: func(cm *corev1.ConfigMap) { cm.Data["stray"] = "1" }, want: []string{DriftData}},
		{name: "data removed", mutate: func(cm *corev1.ConfigMap) { cm.Data = nil }, want: []string{DriftData}},
		{name: "binary data", mutate: func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }, want: []string{DriftBinaryData}},
		{name: "frozen", mutate: func(cm *corev1.ConfigMap) { cm.Immutable = ptr.To(true) }, want: []string{DriftImmutable}},
		{name: "everything at once", mutate: func(cm *corev1.ConfigMap) {
			cm.Labels, cm.Annotations, cm.OwnerReferences = nil, nil, nil
			cm.Data["message"], cm.BinaryData, cm.Immutable = "x", map[string][]byte{"b": nil}, ptr.To(true)
		}, want: []string{DriftLabels, DriftAnnotations, DriftOwnerReferences, DriftData, DriftBinaryData, DriftImmutable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actual := desired.DeepCopy()
			tt.mutate(actual)
			got := Drift(desired, actual)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Drift() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	bundle := testBundle()
	recorded := testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
		b.Status.ConfigMapRef = &configbundlev1alpha1.ConfigMapReference{Name: "web", UID: "cm-uid"}
	})
	ours := DesiredConfigMap(bundle)
	ours.UID = "cm-uid"
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", UID: "other"}}
	otherBundle := DesiredConfigMap(testBundle(func(b *configbundlev1alpha1.ConfigBundle) { b.UID = "old-incarnation" }))
	hijacked := foreign.DeepCopy()
	hijacked.UID = "cm-uid"

	tests := []struct {
		name   string
		bundle *configbundlev1alpha1.ConfigBundle
		cm     *corev1.ConfigMap
		want   bool
	}{
		{"controller reference to the bundle", bundle, ours, true},
		{"no owner, unknown uid", bundle, foreign, false},
		{"controlled by an earlier bundle of the same name", bundle, otherBundle, false},
		{"owner lost but the uid is the recorded one", recorded, hijacked, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownedBy(tt.bundle, tt.cm); got != tt.want {
				t.Errorf("ownedBy() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStripUnmanagedConfigMap(t *testing.T) {
	managed := DesiredConfigMap(testBundle())
	managed.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	unmanaged := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "big", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": strings.Repeat("d", 100)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		},
		Data:       map[string]string{"k": strings.Repeat("v", 1000)},
		BinaryData: map[string][]byte{"b": make([]byte, 1000)},
	}

	got, err := StripUnmanagedConfigMap(managed.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	wantManaged := managed.DeepCopy()
	wantManaged.ManagedFields = nil
	if diff := cmp.Diff(wantManaged, got); diff != "" {
		t.Errorf("managed ConfigMap must stay whole but for managed fields (-want +got):\n%s", diff)
	}

	got, err = StripUnmanagedConfigMap(unmanaged.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns", UID: "u", ResourceVersion: "7"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unmanaged ConfigMap must be a skeleton (-want +got):\n%s", diff)
	}

	if got, _ := StripUnmanagedConfigMap("not a configmap"); got != "not a configmap" {
		t.Errorf("other objects must pass through, got %v", got)
	}
}
