package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
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

// fleetKubeconfig writes one kubeconfig holding a context per member, named after it (as an
// operator's kubeconfig with contexts member-1, member-2 does), and returns its path.
func fleetKubeconfig(t *testing.T, names ...string) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for _, name := range names {
		kc, err := clientcmd.Load(fl.Member(name).Plane.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		merged.Clusters[name], merged.AuthInfos[name] = kc.Clusters[name], kc.AuthInfos[name]
		merged.Contexts[name] = kc.Contexts[name]
	}
	merged.CurrentContext = names[0]
	path := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// stayReady checks that the members stay Ready for the quiet period.
func stayReady(g Gomega, names ...string) {
	g.Consistently(func(g Gomega) {
		for _, name := range names {
			g.Expect(fl.MemberCluster(name)(g)).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), name)
		}
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
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

// registrationObjects returns the resourceVersions of the hub Secret of the member name and of
// its ServiceAccount and ClusterRoleBinding in member: equal results, nothing changed.
func registrationObjects(g Gomega, name, member string) []string {
	ctx := context.Background()
	secret, sa, binding := &corev1.Secret{}, &corev1.ServiceAccount{}, &rbacv1.ClusterRoleBinding{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, secret)).To(Succeed())
	g.Expect(fl.Member(member).Client.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: registration.ServiceAccountName(name)}, sa)).To(Succeed())
	g.Expect(fl.Member(member).Client.Get(ctx, client.ObjectKey{Name: registration.ClusterRoleBindingName(name)}, binding)).To(Succeed())
	return []string{secret.ResourceVersion, sa.ResourceVersion, binding.ResourceVersion}
}

// The first of two harmful cases: unregistering a name that was never registered, with the
// context of a healthy member, used to revoke that member's access and exit 0.
func TestUnregisterRefusesANameNeverRegistered(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m1", "m2")
	fleetConfig := fleetKubeconfig(t, "m1", "m2")
	before := registrationObjects(g, "m2", "m2")

	code, stdout, stderr := hubCommand(t, "unregister", "ghost", "--member-kubeconfig", fleetConfig, "--member-context", "m2",
		"--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty(), "it does not claim to have unregistered anything")
	g.Expect(stderr).To(And(ContainSubstring(`"ghost"`), ContainSubstring("not a registered member"), ContainSubstring("nothing was changed")))

	g.Expect(registrationObjects(g, "m2", "m2")).To(Equal(before), "nothing of m2 changed")
	g.Expect(identify(hubCredential(g, "m2", "m2"))()).To(Succeed(), "the hub's credential for m2 still works")
	stayReady(g, "m1", "m2")
}

// Unregistering a registered name with the context of another member is refused too: it would
// clean up the wrong cluster.
func TestUnregisterRefusesAnotherMembersCluster(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m1", "m2")
	fleetConfig := fleetKubeconfig(t, "m1", "m2")
	before := [][]string{registrationObjects(g, "m1", "m1"), registrationObjects(g, "m2", "m2")}

	code, stdout, stderr := hubCommand(t, "unregister", "m1", "--member-kubeconfig", fleetConfig, "--member-context", "m2",
		"--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(And(ContainSubstring(`member "m1" is the cluster`), ContainSubstring(`which is member "m2"`), ContainSubstring("nothing was changed")))

	g.Expect([][]string{registrationObjects(g, "m1", "m1"), registrationObjects(g, "m2", "m2")}).To(Equal(before))
	stayReady(g, "m1", "m2")
}

// The second harmful case: registering a cluster already registered under another name, and
// then unregistering that second name, used to revoke the first's access too.
func TestRegisterRefusesAClusterRegisteredUnderAnotherName(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, "m1")
	m1Config := fl.Member("m1").Plane.KubeconfigPath
	before := registrationObjects(g, "m1", "m1")

	// Refused, naming the member it already is; nothing is written.
	code, stdout, stderr := hubCommand(t, "register", "dup", "--member-kubeconfig", m1Config, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(And(ContainSubstring(`already registered as member "m1"`), ContainSubstring("--force")))
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "dup"}, &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(fl.Member("m1").Client.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: registration.ServiceAccountName("dup")}, &corev1.ServiceAccount{})).
		To(Satisfy(apierrors.IsNotFound))
	g.Expect(registrationObjects(g, "m1", "m1")).To(Equal(before))

	// Forced, it is registered with its own identity, and the hub manages the cluster once.
	code, _, _ = hubCommand(t, "register", "dup", "--force", "--member-kubeconfig", m1Config, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(0))
	defer fl.MustDeleteSecret(g, "dup")
	g.Eventually(fl.MemberCluster("dup")).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionFalse, hubv1alpha1.DuplicateClusterReason))
	dup := hubCredential(g, "dup", "m1")

	// The obvious undo revokes dup's access, and only dup's.
	code, stdout, _ = hubCommand(t, "unregister", "dup", "--member-kubeconfig", m1Config, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(ContainSubstring("Unregistered member dup"))
	g.Eventually(identify(dup)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized), "dup's token is revoked")
	g.Expect(identify(hubCredential(g, "m1", "m1"))()).To(Succeed(), "m1's token still works")
	g.Expect(registrationObjects(g, "m1", "m1")).To(Equal(before))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(fl.Hub.Get(ctx, client.ObjectKey{Name: "dup"}, &hubv1alpha1.MemberCluster{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	stayReady(g, "m1")
}

func TestRegisterAgainRevokesTheOldToken(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m2")
	old := hubCredential(g, "m2", "m2")
	g.Expect(identify(old)()).To(Succeed())

	fl.MustRegister(t, "m2")
	registered := time.Now()
	g.Eventually(identify(old)).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized))
	t.Logf("the old token was refused %s after hub register returned", time.Since(registered).Round(time.Millisecond))
	g.Expect(identify(hubCredential(g, "m2", "m2"))()).To(Succeed(), "the new one works")
	g.Eventually(fl.MemberCluster("m2")).WithTimeout(timeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason))
	stayReady(g, "m2")
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

	// Usage errors exit 2.
	code, _, stderr = hubCommand(t, "register")
	g.Expect(code).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring("NAME is missing"))

	// The running hub says which build it is.
	g.Eventually(fl.Metrics).WithTimeout(timeout).WithPolling(interval).Should(MatchRegexp(
		`configbundle_build_info\{gitCommit="[^"]+",goVersion="` + runtime.Version() + `",version="[^"]+"\} 1`))
}

// registerWrites returns the writes hub register and unregister (user agent
// registration.FieldOwner) made to the hub cluster since from, and those of the CRD
// configbundles.configbundle.dev by anyone (the hub installs it in a member that joins).
func registerWrites(g Gomega, from time.Time) []string {
	return writesBetween(g, fl.HubPlane, from, time.Now().Add(time.Hour), func(w controlplane.Write) bool {
		return w.UserAgent == registration.FieldOwner || w.Resource == "customresourcedefinitions" && w.Name == configBundleCRD
	})
}

// configBundleCRD is the member CRD's name.
const configBundleCRD = "configbundles.configbundle.dev"

// configBundleCRDObject is the ConfigBundle CRD, as metadata.
func configBundleCRDObject() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: configBundleCRD}}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return crd
}

// hubServesConfigBundles says whether the hub cluster has the ConfigBundle CRD.
func hubServesConfigBundles(g Gomega) bool {
	err := fl.Hub.Get(context.Background(), client.ObjectKey{Name: configBundleCRD}, configBundleCRDObject())
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// `hub register NAME` without member flags used to register the hub cluster itself ($KUBECONFIG
// is the member's kubeconfig as well as the hub's), and the hub then installed the ConfigBundle
// CRD on the hub. It is refused, writing nothing, unless --allow-hub-as-member.
func TestRegisterRefusesTheHubClusterItself(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	t.Setenv("KUBECONFIG", fl.HubPlane.KubeconfigPath) // an operator's shell, pointed at the hub
	g.Expect(hubServesConfigBundles(g)).To(BeFalse(), "the hub cluster starts without the member CRD")
	sa := client.ObjectKey{Namespace: secretNS, Name: registration.ServiceAccountName("self")}

	began := time.Now()
	code, stdout, stderr := hubCommand(t, "register", "self")
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(And(ContainSubstring("refused, nothing was changed"), ContainSubstring("the member is the hub cluster itself"),
		ContainSubstring("--member-kubeconfig"), ContainSubstring("--member-context"), ContainSubstring("--allow-hub-as-member")))
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "self"}, &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(fl.Hub.Get(ctx, sa, &corev1.ServiceAccount{})).To(Satisfy(apierrors.IsNotFound), "no identity in the hub cluster either")
	g.Consistently(func(g Gomega) {
		g.Expect(hubServesConfigBundles(g)).To(BeFalse(), "no member CRD installed on the hub")
		g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Name: "self"}, &hubv1alpha1.MemberCluster{})).To(Satisfy(apierrors.IsNotFound))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	g.Expect(registerWrites(g, began)).To(BeEmpty(), "nothing was written to the hub cluster")

	// Allowed, the hub manages itself as a member: it installs the CRD in its own cluster.
	code, stdout, _ = hubCommand(t, "register", "self", "--allow-hub-as-member", "--wait", "--timeout", joinTimeout.String())
	t.Cleanup(func() {
		g := NewWithT(t)
		code, _, _ := hubCommand(t, "unregister", "self")
		g.Expect(code).To(Equal(0))
		g.Expect(client.IgnoreNotFound(fl.Hub.Delete(ctx, configBundleCRDObject()))).To(Succeed())
		g.Eventually(hubServesConfigBundles).WithTimeout(timeout).WithPolling(interval).Should(BeFalse())
	})
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(And(ContainSubstring("Registered member self"), ContainSubstring("Member self is Ready (Connected)")))
	g.Expect(hubServesConfigBundles(g)).To(BeTrue())
	g.Expect(fl.Hub.Get(ctx, sa, &corev1.ServiceAccount{})).To(Succeed())
}

// Mistakes on the registration command lines: unregister has no flag it would ignore (it took
// --server and --token-duration, and ignored them), and a context that is not in the kubeconfig
// names the ones that are.
func TestRegistrationCommandLineMistakes(t *testing.T) {
	g := NewWithT(t)
	for _, flag := range []string{"--server=https://10.0.0.1:6443", "--token-duration=1h"} {
		code, stdout, stderr := hubCommand(t, "unregister", "m1", flag, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
		g.Expect(code).To(Equal(2), flag)
		g.Expect(stdout).To(BeEmpty())
		g.Expect(stderr).To(ContainSubstring("unknown flag: " + strings.Split(flag, "=")[0]))
	}

	fleetConfig := fleetKubeconfig(t, "m2", "m1")
	for _, args := range [][]string{
		{"register", "m1", "--member-kubeconfig", fleetConfig, "--member-context", "m-1", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath},
		{"unregister", "m1", "--member-kubeconfig", fleetConfig, "--member-context", "m-1", "--hub-kubeconfig", fl.HubPlane.KubeconfigPath},
		{"status", "--hub-kubeconfig", fleetConfig, "--hub-context", "hub"},
	} {
		code, stdout, stderr := hubCommand(t, args...)
		g.Expect(code).To(Equal(1), "hub %s", strings.Join(args, " "))
		g.Expect(stdout).To(BeEmpty())
		g.Expect(stderr).To(And(MatchRegexp(`no context "(m-1|hub)" in `+regexp.QuoteMeta(fleetConfig)), ContainSubstring("its contexts: m1, m2")))
	}
}

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
