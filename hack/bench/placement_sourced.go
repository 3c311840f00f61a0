package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The sourced variant of the placement latency phase: a FleetBundle whose data comes from a
// labelled hub ConfigMap (spec.dataFrom) has that ConfigMap's data changed as many times as the
// template of the untemplated one, alternating with it: a source change must reach every member
// within the same p99 as a template change.
const (
	// sourcedName is the sourced FleetBundle and its source ConfigMap on the hub (not a prefix
	// of placementName, templatedName, nor of mem-).
	sourcedName = "srcd"
	// sourceKey is the key of the source's data, placed beside the message: what the tracker
	// follows in the sourced FleetBundle's ConfigMaps.
	sourceKey = "ca.crt"
	// goalSourcedRatio is the goal of the sourced p99 against the template change's.
	goalSourcedRatio = 1.1
)

// sourcePlace creates the source ConfigMap and the sourced FleetBundle, or changes the source's
// data (one merge patch), and returns the time from the acknowledgement to the ConfigMap with
// value under sourceKey seen in every member.
func (f *fleet) sourcePlace(ctx context.Context, pm []*member, tr *cmTracker, value string, create bool) (time.Duration, error) {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: placementNS, Name: sourcedName}}
	var err error
	if create {
		src.Labels, src.Data = map[string]string{hubv1alpha1.SourceLabel: "true"}, map[string]string{sourceKey: value}
		if err = f.Hub.Create(ctx, src); err == nil {
			fb := newFleetBundle(sourcedName, "sourced")
			fb.Spec.DataFrom = []hubv1alpha1.DataFromSource{{ConfigMapRef: &hubv1alpha1.SourceReference{Name: sourcedName}}}
			err = f.Hub.Create(ctx, fb)
		}
	} else {
		patch := fmt.Sprintf(`{"data":{%q:%q}}`, sourceKey, value)
		err = f.Hub.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	if err != nil {
		return 0, err
	}
	acked := time.Now()
	last, err := tr.waitAll(ctx, pm, placementNS, sourcedName, value)
	return max(0, last.Sub(acked)), err
}

// trackedValue is what the tracker follows of a ConfigMap: the source's key in the sourced
// FleetBundle's, the message in the others.
func trackedValue(cm *corev1.ConfigMap) string {
	if cm.Name == sourcedName {
		return cm.Data[sourceKey]
	}
	return cm.Data["message"]
}

// ofSourced reports whether a write to the hub cluster is of the sourced FleetBundle: its status,
// or one of its revisions.
func ofSourced(w servedWrite) bool {
	return w.Name == sourcedName || len(w.Name) > len(sourcedName) && w.Name[:len(sourcedName)+1] == sourcedName+"-"
}

// sourcedMissed names the sourced goal this run missed, if it did.
func (pr *placementResults) sourcedMissed() []string {
	var missed []string
	if r := ratio(pr.Sourced.pct(99), pr.Hub.pct(99)); r > goalSourcedRatio {
		missed = append(missed, fmt.Sprintf("source change p99 within %.1fx of the template change's (%.2fx)", goalSourcedRatio, r))
	}
	if pr.SourcedErrors > 0 {
		missed = append(missed, fmt.Sprintf("every source change seen in every member within %s (%d not)", placementTimeout, pr.SourcedErrors))
	}
	return missed
}

// cachedConfigMaps reads how many ConfigMaps the hub's cache holds, from its metrics (-1 if it
// cannot tell).
func (f *fleet) cachedConfigMaps() float64 {
	if f.hub() == nil {
		return -1
	}
	m, err := scrape(f.hub().MetricsAddr)
	if err != nil {
		return -1
	}
	return m.sum("configbundle_hub_cached_configmaps", nil)
}

// cachedSecrets reads how many Secrets the hub's cache holds, from its metrics (-1 if it cannot
// tell).
func (f *fleet) cachedSecrets() float64 {
	if f.hub() == nil {
		return -1
	}
	m, err := scrape(f.hub().MetricsAddr)
	if err != nil {
		return -1
	}
	return m.sum("configbundle_hub_cached_secrets", nil)
}
