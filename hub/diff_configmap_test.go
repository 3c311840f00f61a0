package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// updateDiffGolden makes TestConfigMapDiff write testdata/diff instead of comparing with it.
var updateDiffGolden = flag.Bool("update-diff-golden", false, "write hub/testdata/diff from the diffs computed")

// wantedConfigMap is the ConfigMap the reconciler writes for a bundle of two data keys.
func wantedConfigMap() *corev1.ConfigMap {
	b := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "apps", Name: "web", UID: "0b1c",
			Labels:      map[string]string{"team": "web"},
			Annotations: map[string]string{"owner": "platform"},
		},
		Spec: configbundlev1alpha1.ConfigBundleSpec{
			Message: "hello",
			Data: map[string]configbundlev1alpha1.DataValue{
				"app.conf": "listen 8080\nworkers 4\nlog info\ntimeout 30s\nretries 3\nkeepalive on\n",
				"region":   "eu",
			},
		},
	}
	return configbundle.DesiredConfigMap(b)
}

// edited is the wanted ConfigMap as a live one, changed by edit.
func edited(edit func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
	cm := wantedConfigMap()
	cm.ResourceVersion, cm.UID = "42", "9f8e" // what the hub does not write never shows
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate}}
	edit(cm)
	return cm
}

// TestConfigMapDiff requires the diff of each live ConfigMap and the one the hub writes to be
// its golden file in testdata/diff ("" for none): a unified diff of what the hub keeps alone.
func TestConfigMapDiff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		live, want *corev1.ConfigMap
	}{
		{"same", edited(func(*corev1.ConfigMap) {}), wantedConfigMap()},
		{"same-but-unset-immutable-and-empty-maps", edited(func(cm *corev1.ConfigMap) {
			cm.Immutable, cm.BinaryData = nil, map[string][]byte{}
		}), wantedConfigMap()},
		{"data-key-changed-added-removed", edited(func(cm *corev1.ConfigMap) {
			cm.Data["region"] = "us"
			cm.Data["debug"] = "true"
			delete(cm.Data, configbundlev1alpha1.MessageKey)
		}), wantedConfigMap()},
		{"one-line-of-a-long-value", edited(func(cm *corev1.ConfigMap) {
			cm.Data["app.conf"] = strings.Replace(cm.Data["app.conf"], "workers 4", "workers 16", 1)
		}), wantedConfigMap()},
		{"labels-annotations-immutable", edited(func(cm *corev1.ConfigMap) {
			cm.Labels["team"] = "ops"
			cm.Annotations = nil
			cm.Immutable = ptr.To(true)
		}), wantedConfigMap()},
		{"binary-data", edited(func(cm *corev1.ConfigMap) {
			cm.BinaryData = map[string][]byte{"blob": {0, 1, 2}}
		}), wantedConfigMap()},
		{"owner-reference-missing", edited(func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = nil
		}), wantedConfigMap()},
		{"would-join", nil, wantedConfigMap()},
		{"would-leave", edited(func(*corev1.ConfigMap) {}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := configMapYAML(tc.live)
			if err != nil {
				t.Fatal(err)
			}
			b, err := configMapYAML(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := unifiedDiff(a, b, "live/m1/configmaps/apps/web", "hub/m1/configmaps/apps/web")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "diff", tc.name+".diff")
			if *updateDiffGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("diff of %s:\n%s\nwant (%s):\n%s", tc.name, got, golden, want)
			}
		})
	}
}

func TestUnifiedDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny\n", "x\ny\n", ""},
		{"both empty", "", "", ""},
		{"from nothing", "", "x\ny\n", "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"to nothing", "x\n", "", "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n"},
		{"last newline missing", "x\ny", "x\nz", "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"},
		{"two hunks, three lines of context", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n", "0\n2\n3\n4\n5\n6\n7\n8\n9\n10\n12\n",
			"--- a\n+++ b\n@@ -1,4 +1,4 @@\n-1\n+0\n 2\n 3\n 4\n@@ -8,4 +8,4 @@\n 8\n 9\n 10\n-11\n+12\n"},
	} {
		got, err := unifiedDiff(tc.a, tc.b, "a", "b")
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: got\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}
