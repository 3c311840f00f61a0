package configbundle

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// takeOver decides whether the bundle takes over current, a ConfigMap of its name that no
// ConfigBundle of its name controls, by spec.takeOver: Never leaves it alone (a conflict);
// IfNoDiff takes it over if its data equals the bundle's (and otherwise names the keys that
// differ); Always takes it over. A ConfigMap that another object controls, or that is being
// deleted, is never taken over. It returns the ConfigMap to converge, read afresh from the API
// server (the cache strips managedFields, which name who wrote it), and whether to converge it;
// the write that follows is preconditioned on that read's resourceVersion.
func (s *scope) takeOver(ctx context.Context, current *corev1.ConfigMap) (*corev1.ConfigMap, bool, error) {
	policy := s.bundle.Spec.TakeOverPolicy()
	if policy == configbundlev1alpha1.TakeOverNever || metav1.GetControllerOfNoCopy(current) != nil || !current.DeletionTimestamp.IsZero() {
		s.conflict(current)
		return nil, false, nil
	}
	if current.ManagedFields == nil {
		live, err := s.liveConfigMap(ctx, client.ObjectKeyFromObject(current))
		if err != nil || live == nil {
			// Gone meanwhile: its deletion wakes the bundle, which creates its own.
			s.ready = metav1.Condition{}
			return nil, false, err
		}
		if !live.DeletionTimestamp.IsZero() || metav1.GetControllerOfNoCopy(live) != nil {
			s.conflict(live)
			return nil, false, nil
		}
		current = live
	}
	if policy == configbundlev1alpha1.TakeOverIfNoDiff {
		if keys := differingKeys(s.desired(), current); len(keys) > 0 {
			s.setReady(metav1.ConditionFalse, s.conflictReason(), fmt.Sprintf(
				"%s already exists, is not managed by this ConfigBundle (its controller: nothing) and its data differs from the bundle's in %s: "+
					"takeOver IfNoDiff takes it over only once they are equal; it is left untouched",
				s.named(current), strings.Join(keys, ", ")))
			return nil, false, nil
		}
	}
	s.adopting, s.takenFrom = true, fieldManagers(current, s.fieldOwner)
	logf.FromContext(ctx).Info("Taking over an existing ConfigMap", "configMap", objectName(current), "takeOver", policy, "writtenBy", s.takenFrom)
	return current, true, nil
}

// differingKeys lists, sorted, the data keys whose values differ between desired and actual (set
// in one and not the other, or to other values), and the binaryData keys of actual.
func differingKeys(desired, actual *corev1.ConfigMap) []string {
	var keys []string
	for k, v := range desired.Data {
		if got, ok := actual.Data[k]; !ok || got != v {
			keys = append(keys, k)
		}
	}
	for k := range actual.Data {
		if _, ok := desired.Data[k]; !ok {
			keys = append(keys, k)
		}
	}
	for k := range maps.Keys(actual.BinaryData) {
		keys = append(keys, "binaryData."+k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// fieldManagers names the field managers of cm's managedFields other than the hub's, in the
// order they last wrote it: "kubectl-create Update 2026-12-06T21:40:03Z".
func fieldManagers(cm *corev1.ConfigMap, hub string) []string {
	entries := slices.DeleteFunc(slices.Clone(cm.ManagedFields), func(f metav1.ManagedFieldsEntry) bool { return f.Manager == hub })
	slices.SortStableFunc(entries, func(a, b metav1.ManagedFieldsEntry) int { return timeOf(a).Compare(timeOf(b)) })
	out := make([]string, 0, len(entries))
	for _, f := range entries {
		name := string(f.Operation)
		if f.Manager != "" {
			name = f.Manager + " " + name
		}
		if f.Time != nil {
			name += " " + f.Time.UTC().Format(time.RFC3339)
		}
		out = append(out, name)
	}
	return out
}

func timeOf(f metav1.ManagedFieldsEntry) time.Time {
	if f.Time == nil {
		return time.Time{}
	}
	return f.Time.Time
}

// tookOver records a takeover of cm: the log line and the TakenOver Event, naming the field
// managers that wrote it before. A takeover is no heal.
func (s *scope) tookOver(ctx context.Context, cm *corev1.ConfigMap) {
	by := "no field manager on record"
	if len(s.takenFrom) > 0 {
		by = strings.Join(s.takenFrom, ", ")
	}
	logf.FromContext(ctx).Info("Took over an existing ConfigMap", "configMap", objectName(cm), "writtenBy", s.takenFrom)
	s.member.GetEventRecorder(s.fieldOwner).Eventf(s.reference(), s.related(cm), corev1.EventTypeNormal, configbundlev1alpha1.TakenOverEvent, "TakeOver",
		"Cluster %s: took over %s (takeOver %s); written before by %s", s.req.ClusterName, s.named(cm), s.bundle.Spec.TakeOverPolicy(), by)
}
