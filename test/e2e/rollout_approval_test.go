package e2e

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// kubeconfigAs writes a kubeconfig of the hub that acts as user (as `kubectl --as` does) and
// returns its path.
func kubeconfigAs(t *testing.T, g Gomega, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(fl.HubPlane.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// TestRolloutApprovedThroughTheCLI: stage rest requires approval. A new template reaches the
// canary and waits at rest. `hub rollout approve` as an editor of the namespace exits 1, refused
// by the policy configbundle-hub-approval; as an approver it exits 0, and the revision reaches
// every member; approving again exits 0.
func TestRolloutApprovedThroughTheCLI(t *testing.T) {
	g := NewWithT(t)
	const ns, key, editor, approver = "rollout-approval", "e2e.rollout/approval", "approval-editor", "approval-approver"
	members := []string{"ro1", "ro2", "ro3"}
	rolloutFixture(t, ns, key)
	strategy := canaryThenRest(0)
	strategy.Stages[1].RequireApproval = true
	fb := placedThenStaged(t, ns, key, strategy, members...)
	installTenancyRoles(g)
	grant(t, editor, hubv1alpha1.FleetBundleEditorRole, ns)
	grant(t, approver, hubv1alpha1.RolloutApproverRole, ns)

	g.Expect(updateTemplate(g, fb, "v2")).To(Succeed())
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.RolloutPhase(hubv1alpha1.RolloutAwaitingApproval), HaveField("Rollout.Stage", "rest"), fleet.RolloutRevisions(1, 2)))
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(with(all(holds(1, "v1"), members...), "ro1", holds(2, "v2"))))

	approve := func(user string) (int, string, string) {
		return hubCommand(t, "rollout", "approve", "web", "-n", ns, "--stage", "rest", "--hub-kubeconfig", kubeconfigAs(t, g, user))
	}
	g.Eventually(func(g Gomega) {
		code, _, stderr := approve(editor)
		g.Expect(code).To(Equal(1))
		g.Expect(stderr).To(ContainSubstring(hubv1alpha1.ApprovalPolicyName))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the editor's approval is refused by the policy")
	g.Eventually(func() int { code, _, _ := approve(approver); return code }).WithTimeout(timeout).WithPolling(interval).Should(Equal(0))
	g.Eventually(holding(fb, members...)).WithTimeout(timeout).WithPolling(interval).Should(Equal(all(holds(2, "v2"), members...)))
	code, stdout, _ := approve(approver)
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(ContainSubstring("approved for stage rest already (by " + approver + ")"))
}
