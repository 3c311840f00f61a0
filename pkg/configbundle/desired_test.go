package configbundle

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	t.Parallel()
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
		name: "driftPolicy Guard adds the guard label to the bundle's",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyGuard
			b.Labels = map[string]string{"app": "web"}
		}),
		want: &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web", Namespace: "team-a", OwnerReferences: wantOwner,
				Labels: map[string]string{"app": "web", configbundlev1alpha1.GuardLabel: "true"},
			},
			Data:      map[string]string{"message": "hello"},
			Immutable: ptr.To(false),
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
		name: "data beside message",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"app.properties": "a=1", "log-level": "debug", "EMPTY": ""}
		}),
		want: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", OwnerReferences: wantOwner},
			Data:       map[string]string{"message": "hello", "app.properties": "a=1", "log-level": "debug", "EMPTY": ""},
			Immutable:  ptr.To(false),
		},
	}, {
		name: "immutable with data",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Spec.Immutable = true
			b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"k": "v"}
		}),
		want: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", OwnerReferences: wantOwner},
			Data:       map[string]string{"message": "hello", "k": "v"},
			Immutable:  ptr.To(true),
		},
	}, {
		// Admission refuses a data key message; where a CRD lacks that rule, spec.message wins.
		name: "a data key message never overrides spec.message",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"message": "from data", "k": "v"}
		}),
		want: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", OwnerReferences: wantOwner},
			Data:       map[string]string{"message": "hello", "k": "v"},
			Immutable:  ptr.To(false),
		},
	}, {
		name:   "empty data is message alone",
		bundle: testBundle(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Data = map[string]configbundlev1alpha1.DataValue{} }),
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
			t.Parallel()
			got := DesiredConfigMap(tt.bundle)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DesiredConfigMap() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("does not alias the bundle's maps", func(t *testing.T) {
		b := testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
			b.Labels = map[string]string{"a": "1"}
			b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"k": "v"}
		})
		cm := DesiredConfigMap(b)
		cm.Labels["a"] = "changed"
		cm.Data["k"], cm.Data["added"] = "changed", "x"
		if b.Labels["a"] != "1" {
			t.Errorf("bundle labels changed through the desired ConfigMap")
		}
		if want := (map[string]configbundlev1alpha1.DataValue{"k": "v"}); !maps.Equal(b.Spec.Data, want) {
			t.Errorf("bundle data changed through the desired ConfigMap: %v", b.Spec.Data)
		}
	})
}

// TestDriftOfData: with spec.data, every key of the ConfigMap's data is compared: a key the
// bundle sets changed or removed, a key it does not set added, and the whole data gone are each
// data drift; the keys' order is no drift.
func TestDriftOfData(t *testing.T) {
	t.Parallel()
	desired := DesiredConfigMap(testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
		b.Spec.Data = map[string]configbundlev1alpha1.DataValue{"a": "1", "b.conf": "x=y"}
	}))
	tests := []struct {
		name   string
		mutate func(*corev1.ConfigMap)
		want   []string
	}{
		{name: "in sync", mutate: func(*corev1.ConfigMap) {}},
		{name: "same keys built in another order", mutate: func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"b.conf": "x=y", "message": "hello", "a": "1"}
		}},
		{name: "a data key changed", mutate: func(cm *corev1.ConfigMap) { cm.Data["a"] = "2" }, want: []string{DriftData}},
		{name: "a data key emptied", mutate: func(cm *corev1.ConfigMap) { cm.Data["a"] = "" }, want: []string{DriftData}},
		{name: "a data key removed", mutate: func(cm *corev1.ConfigMap) { delete(cm.Data, "b.conf") }, want: []string{DriftData}},
		{name: "a foreign key added", mutate: func(cm *corev1.ConfigMap) { cm.Data["foreign"] = "1" }, want: []string{DriftData}},
		{name: "message removed, data kept", mutate: func(cm *corev1.ConfigMap) { delete(cm.Data, "message") }, want: []string{DriftData}},
		{name: "only message left", mutate: func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"message": "hello"} }, want: []string{DriftData}},
		{name: "a data key moved to binaryData", mutate: func(cm *corev1.ConfigMap) {
			delete(cm.Data, "a")
			cm.BinaryData = map[string][]byte{"a": []byte("1")}
		}, want: []string{DriftData, DriftBinaryData}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			actual := desired.DeepCopy()
			tt.mutate(actual)
			if diff := cmp.Diff(tt.want, Drift(desired, actual)); diff != "" {
				t.Errorf("Drift() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	// A bundle without data: any key beside message is drift.
	plain := DesiredConfigMap(testBundle())
	actual := plain.DeepCopy()
	actual.Data["a"] = "1"
	if diff := cmp.Diff([]string{DriftData}, Drift(plain, actual)); diff != "" {
		t.Errorf("Drift() of a key added beside a plain bundle's message (-want +got):\n%s", diff)
	}
}

// TestSpecFromConfigMap: the spec an immutable ConfigMap was made from is read back whole, its
// data included, and equals (equalSpec) the spec it was rendered from.
func TestSpecFromConfigMap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		want configbundlev1alpha1.ConfigBundleSpec
	}{
		{name: "message alone: no data", cm: &corev1.ConfigMap{Data: map[string]string{"message": "m"}, Immutable: ptr.To(true)},
			want: configbundlev1alpha1.ConfigBundleSpec{Message: "m", Immutable: true}},
		{name: "data beside message", cm: &corev1.ConfigMap{Data: map[string]string{"message": "m", "a": "1", "b.conf": ""}, Immutable: ptr.To(true)},
			want: configbundlev1alpha1.ConfigBundleSpec{Message: "m", Immutable: true, Data: map[string]configbundlev1alpha1.DataValue{"a": "1", "b.conf": ""}}},
		{name: "no message key: empty message", cm: &corev1.ConfigMap{Data: map[string]string{"a": "1"}},
			want: configbundlev1alpha1.ConfigBundleSpec{Data: map[string]configbundlev1alpha1.DataValue{"a": "1"}}},
		{name: "no data at all", cm: &corev1.ConfigMap{}, want: configbundlev1alpha1.ConfigBundleSpec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, specFromConfigMap(tt.cm)); diff != "" {
				t.Errorf("specFromConfigMap() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	for _, spec := range []configbundlev1alpha1.ConfigBundleSpec{
		{Message: "m", Immutable: true},
		{Message: "m", Immutable: true, Data: map[string]configbundlev1alpha1.DataValue{"a": "1", "b": ""}},
		{Message: "", Immutable: false, Data: map[string]configbundlev1alpha1.DataValue{"a": "1"}},
		{Message: "m", Data: map[string]configbundlev1alpha1.DataValue{}},
	} {
		b := testBundle(func(b *configbundlev1alpha1.ConfigBundle) { b.Spec = spec })
		if got := specFromConfigMap(DesiredConfigMap(b)); !got.Equal(spec) {
			t.Errorf("specFromConfigMap(DesiredConfigMap(%+v)) = %+v: not the spec it was made from", spec, got)
		}
	}
}

// TestEqualSpec: two specs are equal when they ask for the same ConfigMap: message, immutable
// and every data key and value; an empty and a missing data are equal.
func TestEqualSpec(t *testing.T) {
	t.Parallel()
	base := configbundlev1alpha1.ConfigBundleSpec{Message: "m", Immutable: true, Data: map[string]configbundlev1alpha1.DataValue{"a": "1"}}
	with := func(mutate func(*configbundlev1alpha1.ConfigBundleSpec)) configbundlev1alpha1.ConfigBundleSpec {
		s := *base.DeepCopy()
		mutate(&s)
		return s
	}
	tests := []struct {
		name string
		a, b configbundlev1alpha1.ConfigBundleSpec
		want bool
	}{
		{"same", base, with(func(*configbundlev1alpha1.ConfigBundleSpec) {}), true},
		{"nil and empty data", configbundlev1alpha1.ConfigBundleSpec{Message: "m"},
			configbundlev1alpha1.ConfigBundleSpec{Message: "m", Data: map[string]configbundlev1alpha1.DataValue{}}, true},
		{"message differs", base, with(func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Message = "n" }), false},
		{"immutable differs", base, with(func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Immutable = false }), false},
		{"a value differs", base, with(func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["a"] = "2" }), false},
		{"a key added", base, with(func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["b"] = "" }), false},
		{"a key removed", base, with(func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data = nil }), false},
		{"a key renamed", base, with(func(s *configbundlev1alpha1.ConfigBundleSpec) {
			s.Data = map[string]configbundlev1alpha1.DataValue{"b": "1"}
		}), false},
		{"empty secretType and Opaque", configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret},
			configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, SecretType: configbundlev1alpha1.SecretTypeOpaque}, true},
		{"secretType differs", configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret},
			configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, SecretType: configbundlev1alpha1.SecretTypeTLS}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Errorf("%+v.Equal(%+v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Equal(tt.a); got != tt.want {
				t.Errorf("Equal is not symmetric for %+v and %+v", tt.a, tt.b)
			}
		})
	}
}

func TestDrift(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			actual := desired.DeepCopy()
			tt.mutate(actual)
			got := Drift(desired, actual)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Drift() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDriftOfSecretType: the view of a Secret carries its type, which is drift of its own, apart
// from the annotations, and goes back into the Secret as its type, never as an annotation.
func TestDriftOfSecretType(t *testing.T) {
	t.Parallel()
	bundle := testBundle(func(b *configbundlev1alpha1.ConfigBundle) {
		b.Annotations = map[string]string{"note": "x"}
		b.Spec = configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, SecretType: configbundlev1alpha1.SecretTypeDockerConfigJSON}
	})
	data := map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}")}
	want := DesiredSecret(bundle, data)
	if want.Type != corev1.SecretTypeDockerConfigJson {
		t.Fatalf("DesiredSecret has type %q", want.Type)
	}
	desired := asConfigMap(want)
	if back := asSecret(desired); back.Type != want.Type || !maps.Equal(back.Annotations, want.Annotations) {
		t.Errorf("asSecret(asConfigMap(s)) has type %q and annotations %v, want %q and %v", back.Type, back.Annotations, want.Type, want.Annotations)
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Secret)
		want   []string
	}{
		{name: "in sync", mutate: func(*corev1.Secret) {}},
		{name: "Opaque", mutate: func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, want: []string{DriftType}},
		{name: "Opaque with an annotation added", mutate: func(s *corev1.Secret) {
			s.Type, s.Annotations = corev1.SecretTypeOpaque, map[string]string{"note": "x", "by-hand": "1"}
		}, want: []string{DriftAnnotations, DriftType}},
		{name: "annotations removed", mutate: func(s *corev1.Secret) { s.Annotations = nil }, want: []string{DriftAnnotations}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			actual := want.DeepCopy()
			tt.mutate(actual)
			if diff := cmp.Diff(tt.want, Drift(desired, asConfigMap(actual))); diff != "" {
				t.Errorf("Drift() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			if got := ownedBy(tt.bundle, tt.cm); got != tt.want {
				t.Errorf("ownedBy() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStripUnmanagedConfigMap(t *testing.T) {
	t.Parallel()
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

	// strip returns the cached form of cm; whole is cm kept whole but for managed fields.
	strip := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		t.Helper()
		got, err := StripUnmanagedConfigMap(cm.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return got.(*corev1.ConfigMap)
	}
	whole := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		w := cm.DeepCopy()
		w.ManagedFields = trimManagedFields(cm.ManagedFields)
		return w
	}

	if diff := cmp.Diff(whole(managed), strip(managed)); diff != "" {
		t.Errorf("managed ConfigMap must stay whole but for the trimmed managed fields (-want +got):\n%s", diff)
	}

	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns", UID: "u", ResourceVersion: "7"}}
	if diff := cmp.Diff(want, strip(unmanaged)); diff != "" {
		t.Errorf("unmanaged ConfigMap must be a skeleton (-want +got):\n%s", diff)
	}

	// A ConfigMap the hub wrote and someone freed of its ownerReference stays whole: its heal
	// needs no read.
	orphaned := managed.DeepCopy()
	orphaned.OwnerReferences = nil
	orphaned.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}, {Manager: DefaultFieldOwner}}
	got := strip(orphaned)
	if diff := cmp.Diff(whole(orphaned), got); diff != "" {
		t.Errorf("a ConfigMap the hub wrote must stay whole but for the trimmed managed fields (-want +got):\n%s", diff)
	}
	if maybeSkeleton(got) {
		t.Errorf("a whole ConfigMap with data taken for a skeleton")
	}
	if !maybeSkeleton(want) {
		t.Errorf("a skeleton not taken for one")
	}

	// Of the managed fields, a managed ConfigMap keeps who wrote it and when, and what the
	// others' entries own (who changed what, without a read): not the hub's fields, which are all.
	at := metav1.NewTime(time.Date(2026, 12, 6, 21, 40, 3, 0, time.UTC))
	fields := metav1.NewFieldsV1(`{"f:data":{"f:message":{}}}`)
	managed.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: DefaultFieldOwner, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields},
	}
	wantFields := []metav1.ManagedFieldsEntry{
		{Manager: DefaultFieldOwner, Operation: metav1.ManagedFieldsOperationUpdate, Time: &at},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at, FieldsType: "FieldsV1", FieldsV1: fields},
	}
	if diff := cmp.Diff(wantFields, strip(managed).ManagedFields); diff != "" {
		t.Errorf("trimmed managed fields (-want +got):\n%s", diff)
	}

	if got, _ := StripUnmanagedConfigMap("not a configmap"); got != "not a configmap" {
		t.Errorf("other objects must pass through, got %v", got)
	}
}

func TestRefusedByAdmission(t *testing.T) {
	configMaps := schema.GroupResource{Resource: "configmaps"}
	policy := apierrors.NewForbidden(configMaps, "web", errors.New("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: v2 is not allowed here"))
	policy.ErrStatus.Reason, policy.ErrStatus.Code = metav1.StatusReasonInvalid, 422
	webhook := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonInvalid,
		Message: `admission webhook "check.example.com" denied the request: no`}}
	validation := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "web", field.ErrorList{field.TooLong(field.NewPath("data"), "", 1048576)})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a policy's Invalid", policy, true},
		{"a policy's Invalid, wrapped", fmt.Errorf("updating ConfigMap team-a/web: %w", policy), true},
		{"a webhook's", webhook, true},
		{"the API server's validation", validation, false},
		{"not from the API server", errors.New("ValidatingAdmissionPolicy 'p' denied request"), false},
	} {
		if got := refusedByAdmission(tc.err); got != tc.want {
			t.Errorf("%s: refusedByAdmission(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
