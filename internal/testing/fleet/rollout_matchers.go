package fleet

import (
	"fmt"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// RolloutCondition matches a FleetBundle status whose condition typ has status and reason.
func RolloutCondition(typ string, status metav1.ConditionStatus, reason string) types.GomegaMatcher {
	return gomega.WithTransform(func(s hubv1alpha1.FleetBundleStatus) string {
		c := meta.FindStatusCondition(s.Conditions, typ)
		if c == nil {
			return "no " + typ
		}
		return fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason)
	}, gomega.Equal(fmt.Sprintf("%s=%s/%s", typ, status, reason)))
}

// RolloutPhase matches a FleetBundle status whose status.rollout.phase is phase.
func RolloutPhase(phase hubv1alpha1.RolloutPhase) types.GomegaMatcher {
	return gomega.WithTransform(func(s hubv1alpha1.FleetBundleStatus) hubv1alpha1.RolloutPhase {
		if s.Rollout == nil {
			return "<no status.rollout>"
		}
		return s.Rollout.Phase
	}, gomega.Equal(phase))
}

// RolloutRevisions matches a FleetBundle status with currentRevision and updateRevision.
func RolloutRevisions(current, update int64) types.GomegaMatcher {
	return gomega.And(gomega.HaveField("CurrentRevision", current), gomega.HaveField("UpdateRevision", update))
}

// RolloutComplete matches the status of a rollout of revision complete in each of n members.
func RolloutComplete(revision int64, n int32) types.GomegaMatcher {
	return gomega.And(RolloutPhase(hubv1alpha1.RolloutComplete), RolloutRevisions(revision, revision),
		RolloutCondition(hubv1alpha1.ProgressingCondition, metav1.ConditionFalse, hubv1alpha1.RolloutCompleteReason),
		RolloutCondition(hubv1alpha1.ReadyCondition, metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		RolloutCondition(hubv1alpha1.StalledCondition, metav1.ConditionFalse, hubv1alpha1.NotStalledReason),
		gomega.HaveField("Clusters.Updated", n), gomega.HaveField("Clusters.Ready", n), gomega.HaveField("FailedClusters", gomega.BeEmpty()))
}
