package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// hubStatus runs `hub status` against the suite's hub with --max-age gateMaxAge and args, and
// returns its exit code and its output, stdout then stderr.
func hubStatus(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, stdout, stderr := hubCommand(t, append([]string{"status", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--max-age", gateMaxAge.String()}, args...)...)
	return code, stdout + stderr
}

// statusIs polls `hub status` with args for Eventually, as "<exit code> <output>".
func statusIs(t *testing.T, args ...string) func() string {
	return func() string {
		code, out := hubStatus(t, args...)
		return fmt.Sprintf("%d %s", code, out)
	}
}

// TestGateFailsOnFailingFleetBundles: a FleetBundle that cannot be placed, at
// ClustersFailed because a member holds a ConfigBundle of its name (Conflict) or lacks its
// namespace (NamespaceMissing), makes the Fleet FleetBundlesFailed naming it and `hub status`
// fail listing it; `hub status --fleet-bundle` gates on the chosen ones alone. Once the
// conflict and the namespace are fixed, everything is green again.
func TestGateFailsOnFailingFleetBundles(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m1", "m2")
	const key, ns, missingNS = "e2e.gate/fleet-bundles", "gate", "gate-missing"
	for _, m := range []string{"m1", "m2"} {
		ensureNamespace(g, m, ns)
		selectMember(t, m, key, "yes")
	}
	foreign := fleet.NewBundle(ns, "conflict", "mine")
	g.Expect(fl.Member("m2").Client.Create(ctx, foreign)).To(Succeed())
	t.Cleanup(func() { _ = fl.Member("m2").Client.Delete(ctx, foreign) })
	healthy := newFleetBundle(t, ns, "healthy", key, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	conflict := newFleetBundle(t, ns, "conflict", key, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	missing := newFleetBundle(t, missingNS, "web", key, configbundlev1alpha1.ConfigBundleSpec{Message: "placed"})
	g.Eventually(fleetBundleStatus(healthy)).WithTimeout(timeout).WithPolling(interval).Should(fleet.FleetBundleReady(hubv1alpha1.AllReadyReason))
	g.Eventually(fleetBundleStatus(conflict)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason), HaveField("FailedClusters", ConsistOf(failedCluster("m2", hubv1alpha1.ConflictReason))),
		HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 2, Applied: 1, Ready: 1, Failed: 1, Updated: 1})))
	g.Eventually(fleetBundleStatus(missing)).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.FleetBundleReady(hubv1alpha1.ClustersFailedReason), HaveField("FailedClusters", HaveLen(2))))

	// The Fleet rolls them up, and names the failing ones.
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.FleetBundlesFailedReason),
		HaveField("Status.FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 3, Ready: 1, Failed: 2}),
		HaveField("Status.HeartbeatIntervalSeconds", BeEquivalentTo(heartbeatInterval/time.Second)),
		HaveField("Status.Conditions", ContainElement(HaveField("Message", And(
			ContainSubstring("gate/conflict (ClustersFailed)"), ContainSubstring("gate-missing/web (ClustersFailed)")))))))

	// hub status fails, listing them with their failing members.
	code, out := hubStatus(t)
	g.Expect(code).To(Equal(1), out)
	g.Expect(out).To(And(ContainSubstring(hubv1alpha1.FleetBundlesFailedReason), ContainSubstring("FleetBundles: 3, 1 Ready, 2 failed"),
		MatchRegexp(`gate/conflict\s+False\s+ClustersFailed\s+2\s+1\s+1\s+m2 \(Conflict\)`),
		MatchRegexp(`gate-missing/web\s+False\s+ClustersFailed\s+2\s+0\s+2\s+m1 \(NamespaceMissing\), m2 \(NamespaceMissing\)`)))
	g.Expect(out).NotTo(ContainSubstring("gate/healthy"), "only the failing ones are listed")

	// --fleet-bundle gates on the chosen ones alone.
	g.Expect(statusIs(t, "--fleet-bundle", "gate/healthy")()).To(And(HavePrefix("0 "), ContainSubstring("Healthy")))
	g.Expect(statusIs(t, "--fleet-bundle", "gate/healthy", "--fleet-bundle", "gate/conflict")()).To(And(HavePrefix("1 "),
		ContainSubstring("FleetBundle gate/conflict is not Ready (ClustersFailed)")))
	g.Expect(statusIs(t, "--fleet-bundle", "gate/absent")()).To(And(HavePrefix("1 "), ContainSubstring("FleetBundle gate/absent does not exist")))
	g.Expect(statusIs(t, "--fleet-bundle", "gate")()).To(And(HavePrefix("2 "), ContainSubstring("want NAMESPACE/NAME")))
	// A --max-age below twice the hub's heartbeat interval would flap: refused.
	code, stdout, stderr := hubCommand(t, "status", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath, "--max-age", (2*heartbeatInterval - time.Millisecond).String())
	g.Expect(code).To(Equal(2))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(ContainSubstring("is less than twice the hub's --heartbeat-interval"))

	// The conflict goes (with its ConfigMap, as the garbage collector these members lack would
	// remove it), the namespace comes: green again.
	g.Expect(fl.Member("m2").Client.Delete(ctx, foreign)).To(Succeed())
	g.Expect(fl.Member("m2").Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conflict"}})).To(Succeed())
	for _, m := range []string{"m1", "m2"} {
		ensureNamespace(g, m, missingNS)
	}
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).Should(And(
		fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		HaveField("Status.FleetBundles", hubv1alpha1.FleetBundleCounts{Total: 3, Ready: 3})))
	g.Eventually(statusIs(t)).WithTimeout(timeout).WithPolling(time.Second).Should(And(HavePrefix("0 "), ContainSubstring("FleetBundles: 3, 3 Ready, 0 failed")))
	g.Expect(statusIs(t, "--fleet-bundle", "gate/conflict", "--fleet-bundle", "gate-missing/web")()).To(HavePrefix("0 "))
}

// TestHubRefusesAClusterWithoutItsCRDs: `hub status` and the hub itself,
// pointed at a cluster that is not the hub (m4, without the hub's CRDs), say so and what to do,
// at once, without a stack trace or the API's "no matches for kind".
func TestHubRefusesAClusterWithoutItsCRDs(t *testing.T) {
	g := NewWithT(t)
	notHub := fl.Member("m4").Plane.KubeconfigPath
	for _, args := range [][]string{
		{"status", "--hub-kubeconfig", notHub},
		{"--kubeconfig", notHub, "--metrics-bind-address=0", "--health-probe-bind-address=0"},
	} {
		start := time.Now()
		code, _, stderr := hubCommand(t, args...)
		g.Expect(code).To(Equal(1), "hub %v", args)
		g.Expect(stderr).To(And(
			ContainSubstring("the cluster serves no MemberCluster, Fleet, FleetBundle, ClusterSet, ClusterSetBinding (hub.configbundle.dev/v1alpha1): is this the hub cluster? apply config/crd"),
			Not(ContainSubstring("no matches for kind")), Not(ContainSubstring("stacktrace")), Not(ContainSubstring("goroutine "))), "hub %v", args)
		g.Expect(time.Since(start)).To(BeNumerically("<", timeout), "hub %v answers at once", args)
	}
}
