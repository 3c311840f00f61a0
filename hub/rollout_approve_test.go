package main

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func TestWithApproval(t *testing.T) {
	full := make([]hubv1alpha1.RolloutApproval, 0, hubv1alpha1.MaxApprovals)
	for i := range hubv1alpha1.MaxApprovals {
		full = append(full, hubv1alpha1.RolloutApproval{Revision: int64(i/2 + 1), Stage: fmt.Sprintf("s%d", i%2), ApprovedBy: "alice"})
	}
	a := hubv1alpha1.RolloutApproval{Revision: 40, Stage: "s0", ApprovedBy: "bob"}
	got := withApproval(full, a, 40)
	if len(got) != hubv1alpha1.MaxApprovals-1 || got[0].Revision != 2 || got[len(got)-1] != a {
		t.Errorf("withApproval of a full list: %d approvals, first of revision %d, last %+v; want those of revision 1 dropped and %+v added",
			len(got), got[0].Revision, got[len(got)-1], a)
	}
	if got := withApproval(full[:2], a, 40); len(got) != 3 {
		t.Errorf("withApproval of a list with room: %d approvals, want 3", len(got))
	}
}

func (h *rolloutHub) testApprove(t *testing.T) {
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "approve"},
		Spec: hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{}, Template: messageTemplate("v2", nil),
			Rollout: &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{
				{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}, RequireApproval: true},
				{Name: "rest", ClusterSelector: &metav1.LabelSelector{}},
			}}},
	}
	if err := h.c.Create(t.Context(), fb); err != nil {
		t.Fatal(err)
	}
	me, err := whoAmI(t.Context(), h.c)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(stage string, wantCode int, says string) {
		t.Helper()
		code, stdout, stderr := h.run(t, "approve", fb.Name, "--stage", stage)
		if code != wantCode || !strings.Contains(stdout+stderr, says) {
			t.Errorf("hub rollout approve --stage %s: exit %d, stdout %q, stderr %q; want exit %d saying %q", stage, code, stdout, stderr, wantCode, says)
		}
	}
	h.setStatus(t, fb.Name, rolloutAt(2, 1, hubv1alpha1.RolloutProgressing, ""))
	expect("canary", exitFailure, "stage canary is not awaiting approval for revision 2: the rollout is Progressing in stage canary")
	expect("rest", exitFailure, "stage rest does not require approval")
	expect("prod", exitFailure, "it has no stage prod")
	if code, _, stderr := h.run(t, "approve", "absent", "--stage", "canary"); code != exitFailure || !strings.Contains(stderr, "no FleetBundle absent in namespace default") {
		t.Errorf("hub rollout approve absent: exit %d, stderr %q; want exit 1, not found", code, stderr)
	}

	h.setStatus(t, fb.Name, rolloutAt(2, 1, hubv1alpha1.RolloutAwaitingApproval, ""))
	expect("canary", exitOK, "fleetbundle.hub.configbundle.dev/approve revision 2 approved for stage canary by "+me+"\n")
	expect("canary", exitOK, "revision 2 is approved for stage canary already (by "+me+")")
	got := &hubv1alpha1.FleetBundle{}
	if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(fb), got); err != nil {
		t.Fatal(err)
	}
	if want := []hubv1alpha1.RolloutApproval{{Revision: 2, Stage: "canary", ApprovedBy: me}}; fmt.Sprint(got.Spec.Rollout.Approvals) != fmt.Sprint(want) ||
		len(got.Spec.Rollout.Stages) != 2 || !got.Spec.Rollout.Stages[0].RequireApproval {
		t.Errorf("spec.rollout after the approval = %+v, want the approvals %+v and the rest as it was", got.Spec.Rollout, want)
	}

	// hub rollout history says who approved which stage of which revision.
	code, stdout, stderr := h.run(t, "history", fb.Name)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != exitOK || stderr != "" || len(lines) < 2 || strings.Join(strings.Fields(lines[len(lines)-2]), " ") != "REVISION STAGE APPROVED BY" ||
		strings.Join(strings.Fields(lines[len(lines)-1]), " ") != "2 canary "+me {
		t.Errorf("hub rollout history: exit %d, stdout %q, stderr %q; want the approval of revision 2 for canary by %s last", code, stdout, stderr, me)
	}
}
