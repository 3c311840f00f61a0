package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/registration"
)

// commandTimeout bounds one run of the hub binary's commands (--wait included).
const commandTimeout = 2 * time.Minute

// hubCommand runs the hub binary with args, as a user would, and returns its exit code, stdout
// and stderr.
func hubCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, fl.Binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running hub %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("$ hub %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// hubCredential returns a client of the member name with the credential the hub holds for it.
func hubCredential(g Gomega, name, member string) client.Client {
	s := &corev1.Secret{}
	g.Expect(fl.Hub.Get(context.Background(), client.ObjectKey{Namespace: secretNS, Name: name}, s)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[hubv1alpha1.DefaultSecretKey])
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSuffix(cfg.Host, "/")).To(Equal(strings.TrimSuffix(fl.Member(member).Plane.Config.Host, "/")), "the credential is for %s", member)
	return c
}

// identify returns a function reading the kube-system namespace with c, as the hub does first.
func identify(c client.Client) func() error {
	return func() error {
		return c.Get(context.Background(), client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})
	}
}

// A member unregistered and registered again from scratch, with labels, waiting for it to be
// Ready; flags before and after NAME.
func TestUnregisterThenRegisterWithLabelsAndWait(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m3")
	b := createBundle(g, "m3", "labels", "web", "kept")
	m3Config := fl.Member("m3").Plane.KubeconfigPath

	code, stdout, _ := hubCommand(t, "unregister", "m3", "--member-kubeconfig", m3Config, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(ContainSubstring("Unregistered member m3"))
	g.Expect(fl.Member("m3").Client.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: registration.ServiceAccountName("m3")}, &corev1.ServiceAccount{})).
		To(Satisfy(apierrors.IsNotFound), "unregister deletes the hub's ServiceAccount in the member")
	g.Expect(fl.Member("m3").Client.Get(ctx, client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRole{})).
		To(Satisfy(apierrors.IsNotFound), "and its RBAC")
	g.Expect(fl.Member("m3").Message(b)(g)).To(Equal("kept"), "and nothing the hub reconciled")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(ctx, client.ObjectKey{Name: "m3"}, &hubv1alpha1.MemberCluster{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	// Flags before NAME; --wait returns once the MemberCluster is Ready, labelled.
	code, stdout, _ = hubCommand(t, "register", "--member-kubeconfig", m3Config, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath,
		"--label", "env=e2e", "--label", "example.com/tier=gold", "--wait", "--timeout", joinTimeout.String(), "m3")
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(And(ContainSubstring("Registered member m3"), ContainSubstring("Member m3 is Ready (Connected)")))
	mc := fl.MemberCluster("m3")(g)
	g.Expect(mc).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), "Ready when register --wait returns")
	g.Expect(mc.Labels).To(And(HaveKeyWithValue("env", "e2e"), HaveKeyWithValue("example.com/tier", "gold")))
	g.Consistently(func(g Gomega) map[string]string { return fl.MemberCluster("m3")(g).Labels }).
		WithTimeout(quietPeriod).WithPolling(interval).Should(HaveKeyWithValue("env", "e2e"), "the hub keeps the labels")

	// Flags after NAME; the labels given replace those register set before.
	code, _, _ = hubCommand(t, "register", "m3", "--member-kubeconfig", m3Config, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath,
		"--label", "env=staging", "--wait")
	g.Expect(code).To(Equal(0))
	g.Expect(fl.MemberCluster("m3")(g).Labels).To(And(HaveKeyWithValue("env", "staging"), Not(HaveKey("example.com/tier"))))
	tamper(g, "m3", b)
	g.Eventually(fl.Member("m3").Message(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal("kept"))
}

func TestHelpAndVersion(t *testing.T) {
	g := NewWithT(t)
	for _, args := range [][]string{{"--help"}, {"register", "--help"}, {"unregister", "--help"}, {"help"}, {"help", "register"}} {
		code, stdout, stderr := hubCommand(t, args...)
		g.Expect(code).To(Equal(0), "hub %s", strings.Join(args, " "))
		g.Expect(stdout).To(ContainSubstring("Usage:"), "hub %s prints its help on stdout", strings.Join(args, " "))
		g.Expect(stderr).To(BeEmpty())
	}

	// hub help and hub version never start the hub: with the hub cluster's kubeconfig at hand
	// they print and exit, logging nothing.
	t.Setenv("KUBECONFIG", fl.HubPlane.KubeconfigPath)
	code, stdout, stderr := hubCommand(t, "version")
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(And(ContainSubstring("Version:"), ContainSubstring("GitCommit:"), ContainSubstring(runtime.Version())))
	g.Expect(stderr).To(BeEmpty())
	code, _, stderr = hubCommand(t, "help")
	g.Expect(code).To(Equal(0))
	g.Expect(stderr).NotTo(ContainSubstring("Starting the hub"))
	// Nor does hub without arguments: it prints its help on stderr and exits 2 (hub/cli_test.go
	// proves that it connects nowhere).
	code, stdout, stderr = hubCommand(t)
	g.Expect(code).To(Equal(2))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(And(ContainSubstring("Usage:"), ContainSubstring("hub run"), Not(ContainSubstring("Starting the hub"))))

	// Usage errors exit 2.
	code, _, stderr = hubCommand(t, "register")
	g.Expect(code).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring("NAME is missing"))

	// The running hub says which build it is.
	g.Eventually(fl.Metrics).WithTimeout(timeout).WithPolling(interval).Should(MatchRegexp(
		`configbundle_build_info\{gitCommit="[^"]+",goVersion="` + runtime.Version() + `",version="[^"]+"\} 1`))
}

// configBundleCRD is the member CRD's name.
const configBundleCRD = "configbundles.configbundle.dev"

// Unregistering leaves what FleetBundles placed in the member; --remove-placed deletes exactly
// that (a bundle of the member's own, and one merely labelled as placed, stay), says how many,
// and the hub does not place them again; the member is unregistered as without it.
func TestUnregisterRemovePlaced(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns = "e2e.unregister/remove-placed", "remove-placed"
	web := placedOn(t, key, ns, "placed", "m3")
	api := newFleetBundle(t, ns, "api", key, configbundlev1alpha1.ConfigBundleSpec{Message: "placed too"})
	everywhere(g, api, "placed too", "m3")
	local := createBundle(g, "m3", ns, "local", "mine")
	impostor := fleet.NewBundle(ns, "impostor", "not placed")
	impostor.Labels = map[string]string{hubv1alpha1.FleetBundleLabel: ns + ".impostor"} // no uid annotation: not the hub's
	g.Expect(fl.Member("m3").Client.Create(ctx, impostor)).To(Succeed())
	t.Cleanup(func() { joined(t, "m3") }) // before the cleanups of placedOn, which need its MemberCluster
	m3Flags := []string{"--member-kubeconfig", fl.Member("m3").Plane.KubeconfigPath, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath}

	// Without --remove-placed, what FleetBundles placed stays, as it always did.
	code, stdout, _ := hubCommand(t, append([]string{"unregister", "m3"}, m3Flags...)...)
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(ContainSubstring("those FleetBundles placed too (--remove-placed deletes these)"))
	g.Expect(placed("m3", web)(g)).NotTo(BeNil())
	g.Expect(placed("m3", api)(g)).NotTo(BeNil())
	// Registered again, selected from the start (a member that rejoins unselected has them removed
	// by the hub), it holds them again.
	out, err := fl.Register(ctx, "m3", "--label", key+"=yes", "--wait", "--timeout", joinTimeout.String())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%s", out)
	for _, fb := range []*hubv1alpha1.FleetBundle{web, api} { // the hub holds them again
		g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(And(
			fleet.FleetBundleReady(hubv1alpha1.AllReadyReason), HaveField("Clusters", hubv1alpha1.PlacementCounts{Selected: 1, Applied: 1, Ready: 1, Updated: 1})))
	}
	old := hubCredential(g, "m3", "m3")

	began := time.Now()
	code, stdout, _ = hubCommand(t, append([]string{"unregister", "m3", "--remove-placed"}, m3Flags...)...)
	t.Logf("hub unregister --remove-placed took %s", time.Since(began).Round(time.Millisecond))
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(And(ContainSubstring("Unregistered member m3"), ContainSubstring("Removed 2 ConfigBundle(s) that FleetBundles placed in the member")))
	g.Expect(stdout).NotTo(ContainSubstring("is a hub running?"), "the hub let go of m3 by itself")

	g.Expect(placed("m3", web)(g)).To(BeNil())
	g.Expect(placed("m3", api)(g)).To(BeNil())
	for _, b := range []*configbundlev1alpha1.ConfigBundle{local, impostor} {
		g.Expect(fl.Member("m3").Client.Get(ctx, client.ObjectKeyFromObject(b), &configbundlev1alpha1.ConfigBundle{})).To(Succeed(), "%s stays", b.Name)
	}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "m3"}, &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Name: "m3"}, &hubv1alpha1.MemberCluster{})).To(Satisfy(apierrors.IsNotFound), "the hub let go of m3 first")
	g.Expect(fl.Member("m3").Client.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: registration.ServiceAccountName("m3")}, &corev1.ServiceAccount{})).
		To(Satisfy(apierrors.IsNotFound))
	g.Eventually(identify(old)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized), "the hub's token is revoked")
	g.Consistently(func(g Gomega) {
		g.Expect(placed("m3", web)(g)).To(BeNil())
		g.Expect(placed("m3", api)(g)).To(BeNil())
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed(), "nothing is placed again")
}
