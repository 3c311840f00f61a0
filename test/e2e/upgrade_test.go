package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// previousRelease is the commit whose hub the upgrade test upgrades from: the previous
// release's. No release has been tagged yet, so it is the commit the current work started from
// (the parent of the commit that added `hub run`). Move it to each release's commit.
const previousRelease = "6455a4741d6b1393a129049391fc6dc737aaea3d"

// upgradeHeartbeat is the --heartbeat-interval of both hubs of the upgrade test: every status
// must be current within one of it once the new hub runs.
const upgradeHeartbeat = 10 * time.Second

// previousHub returns the hub binary built from commit, and its CRDs of the hub cluster: built
// from `git archive` of the commit into a temporary directory, and kept under the user's cache
// directory by commit, so that the build happens once per machine. It skips the test where the
// checkout has no git history.
func previousHub(t *testing.T, commit string) (string, []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil || exec.Command("git", "cat-file", "-e", commit+"^{commit}").Run() != nil {
		t.Skipf("no git history with commit %s (a source archive, or a shallow clone): the upgrade test needs it", commit)
	}
	repo := strings.TrimSpace(string(top))
	crds := previousHubCRDs(t, repo, commit)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(cache, "configbundle-hub", "upgrade", commit, "hub")
	if _, err := os.Stat(bin); err == nil {
		return bin, crds
	}
	start := time.Now()
	src, tmp := t.TempDir(), t.TempDir()
	tarball := filepath.Join(tmp, "source.tar")
	for _, cmd := range []*exec.Cmd{
		exec.Command("git", "-C", repo, "archive", "--format=tar", "-o", tarball, commit),
		exec.Command("tar", "-x", "-f", tarball, "-C", src),
	} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	// Without -trimpath, as the current hub is built: the dependencies come from the build cache.
	build := exec.Command("go", "build", "-o", bin+".tmp",
		"-ldflags", "-X configbundle.dev/hub/pkg/version.Version=previous-"+commit[:12]+" -X configbundle.dev/hub/pkg/version.GitCommit="+commit, "./hub")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the hub of commit %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the hub of commit %s in %v (cached in %s)", commit, time.Since(start).Round(time.Millisecond), bin)
	return bin, crds
}

// previousHubCRDs are the hub cluster's CRDs of commit.
func previousHubCRDs(t *testing.T, repo, commit string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"memberclusters", "fleets", "fleetbundles", "clustersets", "clustersetbindings"} {
		raw, err := exec.Command("git", "-C", repo, "show", commit+":config/crd/bases/hub.configbundle.dev_"+kind+".yaml").Output()
		if err != nil {
			t.Fatalf("reading the %s CRD of commit %s: %v", kind, commit, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
	}
	return crds
}

// TestUpgradeRewritesNothing: a fleet run by the previous release's hub, with a placed, a staged
// and a templated FleetBundle, is upgraded as docs/how-to/install.md says (the CRDs, `hub
// register` again, the hub): the new hub rewrites no ConfigBundle and no ConfigMap in any member
// (their audit logs), and every status is current within one heartbeat of its start.
func TestUpgradeRewritesNothing(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	previous, previousCRDs := previousHub(t, previousRelease)
	members := []string{"u1", "u2", "u3"}
	args := []string{"--probe-interval=" + probeInterval.String(), "--heartbeat-interval=" + upgradeHeartbeat.String()}
	f := fleet.MustStart(t, fleet.Options{
		Hub:       controlplane.Options{CRDs: previousCRDs},
		Members:   controlplane.Named(controlplane.Options{AuditWrites: true}, members...),
		HubBinary: previous,
		HubArgs:   args,
		Timeout:   joinTimeout,
	})
	t.Cleanup(func() {
		f.StopHubs()
		for _, name := range []string{"previous", "current"} {
			if log, err := os.ReadFile(f.LogPath(name)); err == nil && t.Failed() {
				t.Logf("---- tail of the %s hub's log ----\n%s", name, log[max(0, len(log)-8000):])
			}
		}
	})

	// The previous hub runs the fleet.
	for _, m := range members {
		register(t, f, m)
		g.Expect(fleet.EnsureNamespace(ctx, f.Member(m).Client, "upgrade")).To(Succeed())
	}
	g.Expect(fleet.EnsureNamespace(ctx, f.Hub, "upgrade")).To(Succeed())
	g.Expect(f.BindGlobal(ctx, "upgrade")).To(Succeed())
	_, err := f.StartHub(ctx, "previous")
	g.Expect(err).NotTo(HaveOccurred())
	fbs := upgradeFleetBundles()
	for _, fb := range fbs {
		g.Expect(f.Hub.Create(ctx, fb)).To(Succeed())
	}
	// The staged one takes a second revision, stage by stage.
	g.Eventually(allCurrent(f, fbs, members)).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	staged := fbs[1]
	g.Expect(f.Hub.Get(ctx, client.ObjectKeyFromObject(staged), staged)).To(Succeed())
	staged.Spec.Template.Spec.Message = "staged v2"
	g.Expect(f.Hub.Update(ctx, staged)).To(Succeed())
	g.Eventually(allCurrent(f, fbs, members)).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	for _, m := range members {
		g.Expect(fleet.Message(ctx, f.Member(m).Client, client.ObjectKeyFromObject(staged))).To(Equal("staged v2"), m)
	}
	f.StopHub("previous", syscall.SIGTERM)

	// The upgrade: the CRDs, the member RBAC (`hub register` again), the hub.
	upgraded := time.Now()
	current, err := config.HubCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(f.HubConfig, envtest.CRDInstallOptions{CRDs: current})
	g.Expect(err).NotTo(HaveOccurred())
	f.Binary = fl.Binary
	for _, m := range members {
		register(t, f, m)
	}
	_, err = f.StartHub(ctx, "current")
	g.Expect(err).NotTo(HaveOccurred())
	ready := time.Now()
	g.Eventually(func(g Gomega) {
		hb := f.Fleet(g).Status.HeartbeatTime
		g.Expect(hb).NotTo(BeNil())
		g.Expect(hb.Time).NotTo(BeTemporally("<", upgraded.Truncate(time.Second)), "the Fleet's heartbeat is the upgraded hub's")
		scrape, err := f.ScrapeHub("current")
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range members {
			g.Expect(fleet.Sample(scrape, `configbundle_member_ready{cluster="`+m+`"}`)).To(BeEquivalentTo(1), "the upgraded hub reports %s Ready", m)
		}
		allCurrent(f, fbs, members)(g)
	}).WithTimeout(upgradeHeartbeat).WithPolling(interval).Should(Succeed(), "every status current within one heartbeat")
	t.Logf("the upgraded hub was ready %v after the previous one stopped; every status current %v after that",
		ready.Sub(upgraded).Round(time.Millisecond), time.Since(ready).Round(time.Millisecond))

	// Nothing rewritten: no write of a ConfigBundle or a ConfigMap in any member since the
	// previous hub stopped, a quiet period included.
	g.Consistently(allCurrent(f, fbs, members)).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed())
	for _, m := range members {
		bundlesOrConfigMaps := func(w controlplane.Write) bool { return w.Resource == "configbundles" || w.Resource == "configmaps" }
		g.Expect(writesBetween(g, f.Member(m).Plane, upgraded, time.Now(), bundlesOrConfigMaps)).To(BeEmpty(), m)
		t.Logf("%s: writes since the upgrade: %v", m, writesBetween(g, f.Member(m).Plane, upgraded, time.Now(), func(controlplane.Write) bool { return true }))
	}
}

// register registers member m of f with f's hub binary, u1 labelled ring=canary.
func register(t *testing.T, f *fleet.Fleet, m string) {
	t.Helper()
	args := []string{"--timeout", joinTimeout.String()}
	if m == "u1" {
		args = append(args, "--label", "ring=canary")
	}
	out, err := f.Register(context.Background(), m, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
}

// upgradeFleetBundles are the upgrade test's FleetBundles in the namespace upgrade: one placed as
// written, one staged (the members labelled ring=canary first), one templated per member.
func upgradeFleetBundles() []*hubv1alpha1.FleetBundle {
	all := map[string]string{}
	placed := fleet.NewFleetBundle("upgrade", "placed", all, configbundlev1alpha1.ConfigBundleSpec{Message: "placed", Data: map[string]configbundlev1alpha1.DataValue{"k": "v"}})
	staged := fleet.NewFleetBundle("upgrade", "staged", all, configbundlev1alpha1.ConfigBundleSpec{Message: "staged v1"})
	staged.Spec.Rollout = &hubv1alpha1.RolloutStrategy{Stages: []hubv1alpha1.RolloutStage{{
		Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}},
		SoakTime: &metav1.Duration{Duration: time.Second},
	}}, MaxFailures: ptrTo(intstr.FromInt32(0))}
	templated := fleet.NewFleetBundle("upgrade", "templated", all, configbundlev1alpha1.ConfigBundleSpec{
		Message: "for {{ .Cluster.Name }}", Data: map[string]configbundlev1alpha1.DataValue{"cluster": "{{ .Cluster.Name }}"}})
	templated.Spec.TemplateEngine = hubv1alpha1.TemplateEngineGoTemplate
	return []*hubv1alpha1.FleetBundle{placed, staged, templated}
}

func ptrTo[T any](v T) *T { return &v }

// allCurrent checks that every member is Ready and every FleetBundle observed its generation,
// is Ready with every member, and its rollout (if any) complete.
func allCurrent(f *fleet.Fleet, fbs []*hubv1alpha1.FleetBundle, members []string) func(Gomega) {
	return func(g Gomega) {
		for _, m := range members {
			g.Expect(f.MemberCluster(m)(g)).To(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), m)
		}
		for _, fb := range fbs {
			got := &hubv1alpha1.FleetBundle{}
			g.Expect(f.Hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation), fb.Name)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, hubv1alpha1.ReadyCondition)).To(BeTrue(), "%s: %v", fb.Name, got.Status.Conditions)
			g.Expect(got.Status.Clusters.Ready).To(BeEquivalentTo(len(members)), fb.Name)
			g.Expect(got.Status.CurrentRevision).To(Equal(got.Status.UpdateRevision), fb.Name)
		}
	}
}
