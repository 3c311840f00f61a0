package configbundle

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// heals reports whether the bundle's writes heal: with driftPolicy Report, a write only
// publishes a change of the bundle, and is never counted as a heal.
func (s *scope) heals() bool {
	return s.bundle.Spec.Policy() != configbundlev1alpha1.DriftPolicyReport
}

// reportsDrift reports whether a ConfigMap that someone else changed is drift to report, not to
// write: driftPolicy Report, and the bundle's generation is the one its status last found the
// ConfigMap matching (Synced) or drifted from (Drifted). A new generation, a change of the spec,
// is published even over a drifted ConfigMap, as is one the status does not judge yet.
func (s *scope) reportsDrift() bool {
	if s.heals() {
		return false
	}
	stored := s.storedStatus()
	c := meta.FindStatusCondition(stored.Conditions, configbundlev1alpha1.ReadyCondition)
	return c != nil && c.ObservedGeneration == s.bundle.Generation &&
		(c.Reason == configbundlev1alpha1.SyncedReason || c.Reason == configbundlev1alpha1.DriftedReason)
}

// storedStatus is the bundle's status as last written: the reconciler's own write of moments
// ago, which the cached bundle may not show yet, or else the bundle's.
func (s *scope) storedStatus() configbundlev1alpha1.ConfigBundleStatus {
	if recent := s.ledger.recentStatus(s.req, s.bundle.UID); recent != nil {
		return *recent
	}
	return s.bundle.Status
}

// reportDrift records that cm, the managed ConfigMap, differs from the bundle in fields, changed
// by changedBy, and is left so (driftPolicy Report): Ready=False Drifted and status.drift, and a
// Warning Event when the status did not report a drift yet (it started to differ).
func (s *scope) reportDrift(ctx context.Context, cm *corev1.ConfigMap, fields []string, changedBy string) {
	stored := s.storedStatus().Drift
	s.drift = &configbundlev1alpha1.DriftStatus{DetectedTime: metav1.Now().Rfc3339Copy(), Fields: fields, ChangedBy: changedBy}
	if stored != nil {
		s.drift.DetectedTime = stored.DetectedTime
	}
	what := strings.Join(fields, ", ")
	s.setReady(metav1.ConditionFalse, configbundlev1alpha1.DriftedReason, fmt.Sprintf(
		"%s differs from the bundle (%s), changed by %s; driftPolicy Report leaves it so: revert the change, or set driftPolicy Heal or Guard to heal it",
		s.named(cm), what, changedBy))
	if stored != nil {
		return
	}
	logf.FromContext(ctx).Info("Drift detected", "configMap", objectName(cm), "drift", fields, "changedBy", changedBy)
	s.member.GetEventRecorder(s.fieldOwner).Eventf(s.reference(), s.related(cm), corev1.EventTypeWarning, configbundlev1alpha1.DriftDetectedEvent, "Report",
		"Cluster %s: %s differs from the bundle (%s), changed by %s; not healed (driftPolicy Report)", s.req.ClusterName, s.named(cm), what, changedBy)
}
