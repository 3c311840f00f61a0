package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// diffContext is how many unchanged lines a hunk of hub diff shows around a change, as diff -u.
const diffContext = 3

// configMapView is what hub diff compares of a ConfigMap: what the reconciler writes and heals
// (configbundle.Drift), no more. Empty maps are left out, as are an immutable false and the
// ownerReferences' fields the hub does not set, so that only a difference the hub would write
// shows.
type configMapView struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   configMapMetadata `json:"metadata"`
	Immutable  bool              `json:"immutable,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
}

type configMapMetadata struct {
	Name            string                  `json:"name"`
	Namespace       string                  `json:"namespace"`
	Labels          map[string]string       `json:"labels,omitempty"`
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

// configMapYAML is the YAML of what hub diff compares of cm; "" for none.
func configMapYAML(cm *corev1.ConfigMap) (string, error) {
	if cm == nil {
		return "", nil
	}
	v := configMapView{
		APIVersion: "v1",
		Kind:       cmp.Or(cm.Kind, "ConfigMap"), // Secret: hashedSecret
		Metadata: configMapMetadata{
			Name: cm.Name, Namespace: cm.Namespace,
			Labels: nilIfEmpty(cm.Labels), Annotations: nilIfEmpty(cm.Annotations),
		},
		Immutable:  ptr.Deref(cm.Immutable, false),
		Data:       nilIfEmpty(cm.Data),
		BinaryData: cm.BinaryData,
	}
	for _, ref := range cm.OwnerReferences {
		v.Metadata.OwnerReferences = append(v.Metadata.OwnerReferences, metav1.OwnerReference{
			APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID,
			Controller: ptr.To(ptr.Deref(ref.Controller, false)), BlockOwnerDeletion: ptr.To(ptr.Deref(ref.BlockOwnerDeletion, false)),
		})
	}
	if len(v.BinaryData) == 0 {
		v.BinaryData = nil
	}
	raw, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding ConfigMap %s/%s as YAML: %w", cm.Namespace, cm.Name, err)
	}
	return string(raw), nil
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// unifiedDiff is the unified diff (diff -u) of two texts, from the file named from to the file
// named to; "" if they are equal. A missing last newline is added, as diff would say it is.
func unifiedDiff(a, b, from, to string) (string, error) {
	if a == b {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(a), B: lines(b), FromFile: from, ToFile: to, Context: diffContext,
	})
}

// lines splits a text into lines, each ending with a newline; none for "".
func lines(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	out[len(out)-1] += "\n"
	return out
}
