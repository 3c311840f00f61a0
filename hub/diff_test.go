package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/placement"
	"configbundle.dev/hub/pkg/template"
	"configbundle.dev/hub/pkg/tenancy"
)

// diffUser is the user hub diff runs as in the tests, on the hub and in the members: a
// cluster-admin, so that only hub diff itself keeps it from writing.
const diffUser = "diff-user"

func TestDiffUsageErrorsExitTwo(t *testing.T) {
	t.Run("-f", func(t *testing.T) {
		for _, args := range [][]string{{"diff", "web", "-f", "web.yaml"}, {"diff", "--bundle", "web", "-f", "web.yaml", "--cluster", "m1"}} {
			if code, _, stderr := run(t, args...); code != exitUsage || !strings.Contains(stderr, "-f") {
				t.Errorf("hub %s: exit %d, stderr %q; want exit 2", strings.Join(args, " "), code, stderr)
			}
		}
	})
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"diff"}, "the FleetBundle's NAME is missing"},
		{[]string{"diff", "web", "api"}, "want one NAME, got 2 arguments: web api"},
		{[]string{"diff", "Web"}, `"Web" is not a FleetBundle name`},
		{[]string{"diff", "web", "-n", "Apps"}, `--namespace "Apps" is not a namespace name`},
		{[]string{"diff", "web", "--cluster", "EU_1"}, `--cluster "EU_1" is not a MemberCluster name`},
		{[]string{"diff", "--bundle", "web"}, "--bundle needs --cluster MEMBER"},
		{[]string{"diff", "web", "--bundle", "web", "--cluster", "m1"}, "--bundle web names what to compare: want no NAME, got web"},
		{[]string{"diff", "--bundle", "Web", "--cluster", "m1"}, `--bundle "Web" is not a ConfigBundle name`},
		{[]string{"diff", "web", "--timeout", "0s"}, "--timeout 0s is not a duration to wait"},
		{[]string{"diff", "web", "-o", "json"}, "unknown shorthand flag: 'o'"},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
}

// TestDiffUnreachableHubExitsTwo: a hub that cannot be reached (its kubeconfig missing, its API
// server not there) is exit 2, as kubectl diff's errors, not the 1 of a difference, and without
// the usage hint.
func TestDiffUnreachableHubExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{"diff", "web"},
		{"diff", "--bundle", "web", "-n", "apps", "--cluster", "m1"},
		{"diff", "-namespace=apps", "-cluster=eu-1", "web", "-hub-context=hub"},
		{"diff", "-bundle=web", "-cluster=m1", "--secret-key", "config", "--timeout", "5s"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != exitTrouble || stdout != "" || !strings.Contains(stderr, "hub kubeconfig") || strings.Contains(stderr, "for usage") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 2 on loading the hub kubeconfig", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(unreachable, unreachableKubeconfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "diff", "web", "--hub-kubeconfig", unreachable, "--timeout", "5s")
	if code != exitTrouble || stdout != "" || !strings.Contains(stderr, "connection refused") {
		t.Errorf("hub diff with an unreachable hub: exit %d, stdout %q, stderr %q; want exit 2, connection refused", code, stdout, stderr)
	}
	if _, stdout, _ := run(t, "--help"); !strings.Contains(stdout, "diff") {
		t.Errorf("hub --help does not list diff:\n%s", stdout)
	}
}

// diffFleet is a hub control plane and two member control planes, all auditing writes, with no
// hub running: the test writes what a hub would have placed. m3 is a member that cannot be
// reached.
type diffFleet struct {
	hub        *controlplane.ControlPlane
	members    map[string]*controlplane.ControlPlane
	hubC       client.Client
	memberC    map[string]client.Client
	kubeconfig string // diffUser's, of the hub
}

func startDiffFleet(t *testing.T) *diffFleet {
	t.Helper()
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	hubCRDs, err := config.HubCRDs()
	if err != nil {
		t.Fatal(err)
	}
	memberCRDs, err := config.MemberCRDs()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), rolloutStartTimeout)
	defer cancel()
	opts := controlplane.Options{AuditWrites: true, StartTimeout: rolloutStartTimeout}
	hubOpts, memberOpts := opts, opts
	hubOpts.CRDs, memberOpts.CRDs = hubCRDs, memberCRDs
	cps, err := controlplane.Start(ctx, append(controlplane.Named(hubOpts, "hub"), controlplane.Named(memberOpts, "m1", "m2")...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlplane.StopAll(cps); err != nil {
			t.Error(err)
		}
	})
	f := &diffFleet{hub: cps[0], members: map[string]*controlplane.ControlPlane{"m1": cps[1], "m2": cps[2]}, memberC: map[string]client.Client{}}
	f.hubC = adminClient(t, f.hub.Config)
	fleet.MustBindGlobalWith(t, f.hubC, metav1.NamespaceDefault)
	f.kubeconfig = filepath.Join(t.TempDir(), "hub-kubeconfig")
	if err := os.WriteFile(f.kubeconfig, diffUserKubeconfig(t, f.hub, f.hubC), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.hubC.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.DefaultSecretNamespace}}); err != nil {
		t.Fatal(err)
	}
	for name, cp := range f.members {
		f.memberC[name] = adminClient(t, cp.Config)
		f.register(t, name, diffUserKubeconfig(t, cp, f.memberC[name]), map[string]string{"env": "prod"})
	}
	return f
}

func adminClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme, err := hubmanager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// diffUserKubeconfig returns a kubeconfig of diffUser, a cluster-admin of cp.
func diffUserKubeconfig(t *testing.T, cp *controlplane.ControlPlane, c client.Client) []byte {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: diffUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: diffUser}},
	}
	if err := c.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.AddUser(diffUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := controlplane.KubeconfigFor(cp.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// register writes the member's kubeconfig Secret and its MemberCluster on the hub, as hub
// register and the hub would.
func (f *diffFleet) register(t *testing.T, name string, kubeconfig []byte, labels map[string]string) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: name, Labels: map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}},
		Data:       map[string][]byte{hubv1alpha1.DefaultSecretKey: kubeconfig},
	}
	mc := &hubv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: name}},
	}
	for _, obj := range []client.Object{secret, mc} {
		if err := f.hubC.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// place writes in the member what the hub places there for fb: its ConfigBundle and that
// bundle's ConfigMap, as the reconciler writes it.
func (f *diffFleet) place(t *testing.T, member string, fb *hubv1alpha1.FleetBundle) {
	t.Helper()
	rev, err := specRevision(t.Context(), f.hubC, fb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := placement.DesiredOf(fb, rev, template.Member{Name: member, Labels: map[string]string{"env": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	f.writeBundle(t, member, b)
}

// writeBundle creates the ConfigBundle b in the member and its ConfigMap, as the reconciler
// writes it.
func (f *diffFleet) writeBundle(t *testing.T, member string, b *configbundlev1alpha1.ConfigBundle) {
	t.Helper()
	c := f.memberC[member]
	if err := c.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), configbundle.DesiredConfigMap(b)); err != nil {
		t.Fatal(err)
	}
}

// diff runs hub diff as diffUser.
func (f *diffFleet) diff(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr = run(t, append([]string{"diff", "--hub-kubeconfig", f.kubeconfig}, args...)...)
	t.Logf("$ hub diff %s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	return code, stdout, stderr
}

// expect runs hub diff and requires its exit code, and each of says in its stdout.
func (f *diffFleet) expect(t *testing.T, args []string, code int, says ...string) string {
	t.Helper()
	got, stdout, stderr := f.diff(t, args...)
	if got != code {
		t.Errorf("hub diff %s: exit %d, want %d", strings.Join(args, " "), got, code)
	}
	for _, s := range says {
		if !strings.Contains(stdout+stderr, s) {
			t.Errorf("hub diff %s does not say %q", strings.Join(args, " "), s)
		}
	}
	return stdout
}

// TestDiff: hub diff against real control planes exits 0 when the members' ConfigMaps are what
// the hub would write, 1 with a unified diff when one differs or a member would join or leave,
// 2 when a member cannot be reached (comparing the others still); the --bundle form the same
// for one ConfigBundle; and it writes nothing to the hub or any member, as a user who may.
func TestDiff(t *testing.T) {
	f := startDiffFleet(t)
	ctx := t.Context()
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "web"},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
			Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{
				Message: "hello", Data: map[string]configbundlev1alpha1.DataValue{"region": "eu"},
			}},
		},
	}
	if err := f.hubC.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	f.place(t, "m1", fb)

	// m1 holds what the hub would write; m2 is selected and holds nothing: it would join.
	f.expect(t, []string{"web", "--cluster", "m1"}, exitOK, "# member: m1: ConfigMap default/web matches")
	f.expect(t, []string{"web"}, exitFailure, "# member: m1: ConfigMap default/web matches",
		"# member: m2 (would join: selected; the hub places ConfigBundle default/web there", "--- live/m2/configmaps/default/web\n+++ hub/m2/configmaps/default/web\n@@ -0,0 +1,",
		"+  region: eu\n")

	// A hand edit of m1's ConfigMap shows as a unified diff of the hub's side.
	cm := &corev1.ConfigMap{}
	if err := f.memberC["m1"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["region"] = "us"
	if err := f.memberC["m1"].Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	f.expect(t, []string{"web", "--cluster", "m1"}, exitFailure, "# member: m1\n--- live/m1/configmaps/default/web\n+++ hub/m1/configmaps/default/web\n@@ ",
		"-  region: us\n+  region: eu\n")
	f.expect(t, []string{"--bundle", "web", "--cluster", "m1"}, exitFailure, "-  region: us\n+  region: eu\n")

	// m1 no longer selected: it would leave, its ConfigMap going with its bundle.
	mc := &hubv1alpha1.MemberCluster{}
	if err := f.hubC.Get(ctx, client.ObjectKey{Name: "m1"}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Labels["env"] = "dev"
	if err := f.hubC.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	f.expect(t, []string{"web", "--cluster", "m1"}, exitFailure, "# member: m1 (would leave: no longer selected; the hub removes ConfigBundle default/web and its ConfigMap)",
		"+++ hub/m1/configmaps/default/web\n@@ -1,", " +0,0 @@\n")

	// A ConfigBundle of the member alone, its ConfigMap as the reconciler writes it.
	f.writeBundle(t, "m2", &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "local"},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: "mine"},
	})
	f.expect(t, []string{"--bundle", "local", "--cluster", "m2"}, exitOK, "# member: m2: ConfigMap default/local matches")
	// A bundle with target Secret is compared by its keys and the hashes of their values (the
	// hub keeps no snapshot for this one: the hub would write no key).
	pull := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "pull"},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret},
	}
	if err := f.memberC["m2"].Create(ctx, pull); err != nil {
		t.Fatal(err)
	}
	if err := f.memberC["m2"].Create(ctx, configbundle.DesiredSecret(pull, map[string][]byte{"token": []byte("s3cr3t-value")})); err != nil {
		t.Fatal(err)
	}
	out := f.expect(t, []string{"--bundle", "pull", "--cluster", "m2"}, exitFailure, "--- live/m2/secrets/default/pull\n+++ hub/m2/secrets/default/pull\n",
		"-  token: sha256:", "kind: Secret")
	if strings.Contains(out, "s3cr3t") || strings.Contains(out, "czNjcjN0") {
		t.Errorf("hub diff shows a Secret's value:\n%s", out)
	}
	f.expect(t, []string{"--bundle", "absent", "--cluster", "m2"}, exitTrouble, "no ConfigBundle absent in namespace default of member m2")
	f.expect(t, []string{"absent"}, exitTrouble, "no FleetBundle absent in namespace default")

	// A bundle left in m2 by a deleted FleetBundle of the same name is replaced.
	api := fb.DeepCopy()
	api.ObjectMeta = metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "api"}
	if err := f.hubC.Create(ctx, api); err != nil {
		t.Fatal(err)
	}
	stale := api.DeepCopy()
	stale.UID = "0d1e7ed0-0000-4000-8000-000000000000"
	f.place(t, "m2", stale)
	f.expect(t, []string{"api", "--cluster", "m2"}, exitFailure, "# member: m2 (would be replaced: it holds ConfigBundle default/api of a deleted FleetBundle of that name",
		"-    hub.configbundle.dev/fleet-bundle-uid: 0d1e7ed0-0000-4000-8000-000000000000\n+    hub.configbundle.dev/fleet-bundle-uid: "+string(api.UID)+"\n")

	// m3 cannot be reached: exit 2, the others compared all the same.
	f.register(t, "m3", unreachableKubeconfig(t), map[string]string{"env": "prod"})
	f.expect(t, []string{"web"}, exitTrouble, "# member: m1 (would leave", "# member: m2 (would join", "# member: m3: not compared:",
		"1 member(s) could not be compared: m3\n")
	f.expect(t, []string{"web", "--cluster", "m3"}, exitTrouble, "# member: m3: not compared:")
	f.expect(t, []string{"--bundle", "web", "--cluster", "m3"}, exitTrouble, "member m3: reading ConfigBundle default/web")
	f.expect(t, []string{"web", "--cluster", "m4"}, exitTrouble, "no MemberCluster m4")

	f.testReadOnly(t)

	// -f: a manifest not applied yet, compared as if it were, once the hub's API server validated
	// it in a dry run (after testReadOnly: the dry run is a write request of diffUser's).
	changed := strings.NewReplacer("name: preview", "name: web", "env: dev", "env: prod", "  templateEngine: GoTemplate\n", "", "preview {{ .Cluster.Name }}", "hello").Replace(previewManifest)
	changed += "      data:\n        region: us\n"
	f.expect(t, []string{"-f", writeManifest(t, changed), "--cluster", "m2"}, exitFailure, "# member: m2 (would join",
		"+  region: us\n")
	f.expect(t, []string{"-f", writeManifest(t, previewManifest), "--cluster", "m2"}, exitOK, "not selected by spec.clusterSelector")
	f.expect(t, []string{"-f", writeManifest(t, strings.Replace(previewManifest, "kind: FleetBundle", "kind: Fleet", 1))}, exitTrouble, "kind FleetBundle")

	f.testTenant(t)
}

// testTenant: a tenant with the FleetBundle editor role in its namespace alone (impersonated)
// diffs its FleetBundle: the members from its ClusterSetBinding, each reached through
// --member-kubeconfig, its own credentials; without it, it is told to give one (exit 2).
func (f *diffFleet) testTenant(t *testing.T) {
	applyFiles(t, f.hubC, filepath.Join("..", "config", "rbac", "hub", "tenancy_roles.yaml"))
	mustCreate(t, f.hubC, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}})
	mustCreate(t, f.hubC, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "team-a-fleetbundles"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: hubv1alpha1.FleetBundleEditorRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}},
	})
	members := &hubv1alpha1.MemberClusterList{}
	if err := f.hubC.List(t.Context(), members); err != nil {
		t.Fatal(err)
	}
	set := &hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: tenantNS},
		Spec: hubv1alpha1.ClusterSetSpec{ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}
	mustCreate(t, f.hubC, set)
	binding := &hubv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: tenantNS},
		Spec: hubv1alpha1.ClusterSetBindingSpec{ClusterSet: tenantNS}}
	mustCreate(t, f.hubC, binding)
	binding.Status = tenancy.ClusterSetBindingStatus(binding, true)
	binding.Status.Clusters, binding.Status.ClusterCount = tenancy.BoundClusters(set, members.Items)
	mustUpdateStatus(t, f.hubC, binding)
	mustCreate(t, f.hubC, &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "web"},
		Spec: goTemplate(&metav1.LabelSelector{}, "hello {{ .Cluster.Name }}", nil)})

	// The tenant's own kubeconfig of the members: a context named after each.
	kc := clientcmdapi.NewConfig()
	for name, cp := range f.members {
		raw, err := controlplane.KubeconfigFor(name, cp.Config)
		if err != nil {
			t.Fatal(err)
		}
		one, err := clientcmd.Load(raw)
		if err != nil {
			t.Fatal(err)
		}
		kc.Clusters[name], kc.AuthInfos[name], kc.Contexts[name] = one.Clusters[name], one.AuthInfos[name], one.Contexts[name]
	}
	memberKubeconfig := filepath.Join(t.TempDir(), "members.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, memberKubeconfig); err != nil {
		t.Fatal(err)
	}
	hub := impersonatingKubeconfig(t, f.hub.KubeconfigPath, tenantUser)
	as := func(args ...string) (int, string, string) {
		code, stdout, stderr := run(t, append([]string{"diff", "--hub-kubeconfig", hub}, args...)...)
		t.Logf("$ hub diff %s (as %s)\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), tenantUser, code, stdout, stderr)
		return code, stdout, stderr
	}
	if code, stdout, _ := as("web", "-n", tenantNS, "--cluster", "m2", "--member-kubeconfig", memberKubeconfig); code != exitFailure ||
		!strings.Contains(stdout, "# member: m2 (would join") || !strings.Contains(stdout, "+  message: hello m2\n") {
		t.Errorf("hub diff web --cluster m2 --member-kubeconfig as %s: exit %d; want exit 1, m2 would join", tenantUser, code)
	}
	if code, _, stderr := as("web", "-n", tenantNS, "--cluster", "m2"); code != exitTrouble || !strings.Contains(stderr, "give --member-kubeconfig") {
		t.Errorf("hub diff web --cluster m2 as %s: exit %d; want exit 2, saying to give --member-kubeconfig", tenantUser, code)
	}
	if code, _, stderr := as("web", "-n", tenantNS, "--cluster", "m1", "--member-kubeconfig", memberKubeconfig); code != exitTrouble || !strings.Contains(stderr, "no MemberCluster m1") {
		t.Errorf("hub diff web --cluster m1 as %s: exit %d; want exit 2: m1 (env dev) is in no set of team-a's", tenantUser, code)
	}
}

// unreachableKubeconfig is a kubeconfig of an API server that is not there: a port that was
// free a moment ago.
func unreachableKubeconfig(t *testing.T) []byte {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	kc, err := controlplane.KubeconfigFor("m3", &rest.Config{Host: "https://" + addr, BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// testReadOnly: every hub diff above ran as diffUser, a cluster-admin of the hub and of each
// member, and wrote nothing: no audit log holds a write request of that user.
func (f *diffFleet) testReadOnly(t *testing.T) {
	t.Helper()
	for name, cp := range map[string]*controlplane.ControlPlane{"hub": f.hub, "m1": f.members["m1"], "m2": f.members["m2"]} {
		writes, err := cp.Writes()
		if err != nil {
			t.Fatal(err)
		}
		others := 0
		for _, w := range writes {
			if w.User == diffUser {
				t.Errorf("hub diff wrote to %s: %+v", name, w)
			} else {
				others++
			}
		}
		if others == 0 {
			t.Fatalf("the audit log of %s holds no write at all, not even the test's own: it proves nothing", name)
		}
	}
}
