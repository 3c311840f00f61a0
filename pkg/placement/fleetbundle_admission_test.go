package placement_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The FleetBundle CRD's rules, as the hub's API server applies them.

// editSpec changes a FleetBundle's spec with edit, again on a conflict (the hub writes its
// finalizer and status meanwhile), and returns the API server's answer.
func editSpec(fb *hubv1alpha1.FleetBundle, edit func(*hubv1alpha1.FleetBundleSpec)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &hubv1alpha1.FleetBundle{}
		if err := hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got); err != nil {
			return err
		}
		edit(&got.Spec)
		return hub.Update(context.Background(), got)
	})
}

// TestFleetBundleTemplateAdmission: the template has a ConfigBundle's rules: an immutable
// template's message cannot change, and the message bound, once JSON-escaped as etcd stores it,
// refuses a FleetBundle naming the template's field.
func TestFleetBundleTemplateAdmission(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	frozen := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frozen"}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: selecting("test.admission/nobody"),
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "frozen", Immutable: true}},
	}}
	g.Expect(hub.Create(context.Background(), frozen)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), frozen) })
	err := editSpec(frozen, func(s *hubv1alpha1.FleetBundleSpec) { s.Template.Spec.Message = "thawed" })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("immutable"))

	huge := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}}
	huge.Spec.Template.Spec.Message = strings.Repeat("<", 270_000)
	err = hub.Create(context.Background(), huge)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %.300v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.template.spec.message"))
}

// TestFleetBundleImmutableFreezesOverridesAndEngine: a FleetBundle whose template is immutable
// refuses a change of its overrides (reordered, changed, added or removed) and of its
// templateEngine, with the message "overrides and templateEngine are immutable"; a FleetBundle
// that is not immutable accepts the same changes.
func TestFleetBundleImmutableFreezesOverridesAndEngine(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mk := func(name string, immutable bool) *hubv1alpha1.FleetBundle {
		fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: selecting("test.admission/nobody"),
			TemplateEngine:  hubv1alpha1.TemplateEngineGoTemplate,
			Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "cluster={{ .Cluster.Name }}", Immutable: immutable}},
			Overrides: []hubv1alpha1.TemplateOverride{
				{Name: "dev", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, Message: ptr.To("debug=true")},
				{Name: "canary", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}, Message: ptr.To("canary=true")},
			},
		}}
		g.Expect(hub.Create(context.Background(), fb)).To(Succeed())
		t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
		return fb
	}
	frozen, thawed := mk("frozen", true), mk("thawed", false)
	// In this order, so that each applies to a FleetBundle that took the ones before it.
	edits := []struct {
		what string
		edit func(*hubv1alpha1.FleetBundleSpec)
	}{
		{"the overrides reordered", func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides[0], s.Overrides[1] = s.Overrides[1], s.Overrides[0] }},
		{"an override's message changed", func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides[0].Message = ptr.To("debug=false") }},
		{"an override added", func(s *hubv1alpha1.FleetBundleSpec) {
			s.Overrides = append(s.Overrides, hubv1alpha1.TemplateOverride{Name: "prod", ClusterSelector: metav1.LabelSelector{}, Message: ptr.To("prod")})
		}},
		{"the overrides removed", func(s *hubv1alpha1.FleetBundleSpec) { s.Overrides = nil }},
		{"templateEngine to None", func(s *hubv1alpha1.FleetBundleSpec) { s.TemplateEngine = hubv1alpha1.TemplateEngineNone }},
	}
	for _, e := range edits {
		err := editSpec(frozen, e.edit)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want Invalid, got %v", e.what, err)
		g.Expect(err.Error()).To(ContainSubstring("overrides and templateEngine are immutable"), e.what)
	}
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(hub.Get(context.Background(), client.ObjectKeyFromObject(frozen), got)).To(Succeed())
	g.Expect(got.Spec.TemplateEngine).To(Equal(hubv1alpha1.TemplateEngineGoTemplate))
	g.Expect(got.Spec.Overrides).To(HaveLen(2))
	g.Expect(got.Spec.Overrides[0].Message).To(Equal(ptr.To("debug=true")), "the order is frozen too")

	for _, e := range edits {
		g.Expect(editSpec(thawed, e.edit)).To(Succeed(), "not immutable, %s", e.what)
	}
}

// TestFleetBundleRevisionHistoryLimitAdmission: revisionHistoryLimit is at most
// MaxRevisionHistoryLimit (20): 21 is refused, naming the field; 20 is admitted.
func TestFleetBundleRevisionHistoryLimitAdmission(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mk := func(name string, limit int32) *hubv1alpha1.FleetBundle {
		return &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector:      selecting("test.admission/nobody"),
			RevisionHistoryLimit: ptr.To(limit),
			Template:             hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "history"}},
		}}
	}
	err := hub.Create(context.Background(), mk("too-long", hubv1alpha1.MaxRevisionHistoryLimit+1))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.revisionHistoryLimit"))

	most := mk("most", hubv1alpha1.MaxRevisionHistoryLimit)
	g.Expect(hub.Create(context.Background(), most)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), most) })
	err = editSpec(most, func(s *hubv1alpha1.FleetBundleSpec) { s.RevisionHistoryLimit = ptr.To[int32](21) })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "an update to 21: want Invalid, got %v", err)
}

// TestFleetBundleApprovalStageAdmission: an approval naming a stage that spec.rollout.stages does
// not name is refused with a message saying so; one naming a stage is admitted.
func TestFleetBundleApprovalStageAdmission(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mk := func(name, stage string) *hubv1alpha1.FleetBundle {
		return &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: selecting("test.admission/nobody"),
			Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "approved"}},
			Rollout: &hubv1alpha1.RolloutStrategy{
				Stages:    []hubv1alpha1.RolloutStage{{Name: "prod", ClusterSelector: &metav1.LabelSelector{}, RequireApproval: true}},
				Approvals: []hubv1alpha1.RolloutApproval{{Revision: 1, Stage: stage, ApprovedBy: "alice"}},
			},
		}}
	}
	err := hub.Create(context.Background(), mk("unknown-stage", "canary"))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("spec.rollout"), ContainSubstring("every approval's stage must be one of spec.rollout.stages")))

	known := mk("known-stage", "prod")
	g.Expect(hub.Create(context.Background(), known)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), known) })
	err = editSpec(known, func(s *hubv1alpha1.FleetBundleSpec) { s.Rollout.Stages[0].Name = "production" })
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "renaming the stage an approval names: want Invalid, got %v", err)
}
