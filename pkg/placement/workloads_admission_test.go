package placement_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// TestRolloutWorkloadsAdmission: spec.rollout.workloads is Ignore, Observe or Restart, and
// workloadTimeout is more than 0s: anything else is refused, naming the field.
func TestRolloutWorkloadsAdmission(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		name    string
		policy  hubv1alpha1.WorkloadPolicy
		timeout time.Duration
		refusal string // a part of the refusal; "" if admitted
	}{
		{name: "restart", policy: hubv1alpha1.WorkloadsRestart, timeout: time.Minute},
		{name: "observe", policy: hubv1alpha1.WorkloadsObserve},
		{name: "unknown", policy: "Reload", refusal: `spec.rollout.workloads: Unsupported value: "Reload"`},
		{name: "zero", policy: hubv1alpha1.WorkloadsRestart, timeout: -1, refusal: "workloadTimeout must be greater than 0s"},
		{name: "negative", policy: hubv1alpha1.WorkloadsObserve, timeout: -time.Minute, refusal: "workloadTimeout must be greater than 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{Name: "canary"}}, Workloads: tc.policy}
			switch {
			case tc.timeout == -1:
				s.WorkloadTimeout = &metav1.Duration{}
			case tc.timeout != 0:
				s.WorkloadTimeout = &metav1.Duration{Duration: tc.timeout}
			}
			fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: hubv1alpha1.FleetBundleSpec{
				ClusterSelector: selecting("test.admission/nobody"), Rollout: s,
				Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "workloads"}},
			}}
			err := hub.Create(context.Background(), fb)
			if tc.refusal == "" {
				g.Expect(err).NotTo(HaveOccurred())
				t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.refusal))
		})
	}
}
