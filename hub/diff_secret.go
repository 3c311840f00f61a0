package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/rollout"
)

// hub diff compares the Secret of a bundle with target Secret by its keys and the SHA-256 of each
// value ("sha256:<hex>"): never a value.

// hashedSecret is what hub diff shows of a Secret: its metadata and immutability, and for each
// key the hash of its value; nil for none.
func hashedSecret(s *corev1.Secret) *corev1.ConfigMap {
	if s == nil {
		return nil
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: s.ObjectMeta, Immutable: s.Immutable}
	if len(s.Data) > 0 {
		cm.Data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			sum := sha256.Sum256(v)
			cm.Data[k] = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	return cm
}

// liveObject reads the ConfigMap, or with target Secret the hashed Secret, of the bundle key in a
// member; nil if there is none.
func liveObject(ctx context.Context, member client.Reader, key types.NamespacedName, target configbundlev1alpha1.Target) (*corev1.ConfigMap, error) {
	if target != configbundlev1alpha1.TargetSecret {
		return getOrNil(ctx, member, key, &corev1.ConfigMap{})
	}
	s, err := getOrNil(ctx, member, key, &corev1.Secret{})
	if err != nil || s == nil {
		return nil, err
	}
	return hashedSecret(s), nil
}

// wanted is what the hub would write for want: its ConfigMap, or with target Secret its hashed
// Secret, with the data of the hub snapshot its spec.hubSource names (none if the hub keeps none
// yet).
func (d *differ) wanted(ctx context.Context, want *configbundlev1alpha1.ConfigBundle) (*corev1.ConfigMap, error) {
	if want.Spec.TargetKind() != configbundlev1alpha1.TargetSecret {
		return configbundle.DesiredConfigMap(want), nil
	}
	var data map[string][]byte
	if src := want.Spec.HubSource; src != nil {
		snapshot, err := rollout.ReadSnapshot(ctx, d.hub, types.NamespacedName{Namespace: src.Namespace, Name: src.Name}, src.Revision)
		if err != nil {
			return nil, err
		}
		if snapshot != nil {
			data = snapshot.Data
		}
	}
	return hashedSecret(configbundle.DesiredSecret(want, data)), nil
}
