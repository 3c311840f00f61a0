package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/placement"
	"configbundle.dev/hub/pkg/template"
)

// renderReader is the user `hub render` runs as in the tests: it may get and list FleetBundles,
// MemberClusters, and the ClusterSets and ClusterSetBindings that decide which members a
// FleetBundle may select, and nothing else.
const renderReader = "render-reader"

func TestRenderUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"render"}, "the FleetBundle's NAME is missing"},
		{[]string{"render", "web", "api"}, "want one NAME, got 2 arguments: web api"},
		{[]string{"render", "Web"}, `"Web" is not a FleetBundle name`},
		{[]string{"render", "web", "-n", "Apps"}, `--namespace "Apps" is not a namespace name`},
		{[]string{"render", "web", "--cluster", "EU_1"}, `--cluster "EU_1" is not a MemberCluster name`},
		{[]string{"render", "web", "--cluster"}, "flag needs an argument: --cluster"},
		{[]string{"render", "web", "-o", "json"}, "unknown shorthand flag: 'o'"},
		{[]string{"render", "web", "--watch"}, "unknown flag: --watch"},
		{[]string{"render", "web", "-f", "web.yaml"}, "-f web.yaml names the FleetBundle: want no NAME, got web"},
		{[]string{"render", "-f", "web.yaml", "-n", "Apps"}, `--namespace "Apps" is not a namespace name`},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
}

// TestRenderFlags: render takes the flags of the rollout commands, in either flag style, and a
// command line that parses reaches the hub (a kubeconfig that does not exist: exit 1, not 2).
func TestRenderFlags(t *testing.T) {
	for _, args := range [][]string{
		{"render", "web"},
		{"render", "web", "-n", "apps", "--cluster", "eu-1"},
		{"render", "-namespace=apps", "-cluster=eu-1", "web"},
		{"render", "web", "--hub-context", "hub"},
		{"render", "-hub-context=hub", "web"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "hub kubeconfig") {
			t.Errorf("hub %s: exit %d, stdout %q, stderr %q; want exit 1 on loading the hub kubeconfig", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	code, stdout, stderr := run(t, "render", "--help")
	if code != exitOK || stderr != "" {
		t.Errorf("hub render --help: exit %d, stderr %q", code, stderr)
	}
	for _, flag := range []string{"--hub-kubeconfig", "--hub-context", "-n, --namespace", "--cluster"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("hub render --help does not mention %s", flag)
		}
	}
	if _, stdout, _ := run(t, "--help"); !strings.Contains(stdout, "render") {
		t.Errorf("hub --help does not list render:\n%s", stdout)
	}
}

// renderHub is a hub control plane with the hub's CRDs, auditing writes, an admin client of it
// and the kubeconfig of renderReader.
type renderHub struct {
	cp         *controlplane.ControlPlane
	c          client.Client
	kubeconfig string
}

// startRenderHub starts the hub's control plane, stopped when t ends, and creates the
// MemberClusters: no hub runs, hub render reads what the tests write.
func startRenderHub(t *testing.T) *renderHub {
	t.Helper()
	cp, c := startHubControlPlane(t, controlplane.Options{AuditWrites: true})
	h := &renderHub{cp: cp, c: c, kubeconfig: readerKubeconfig(t, cp, c)}
	for name, labels := range map[string]map[string]string{
		"eu-1":  {"env": "prod", "region": "eu"},
		"us-1":  {"env": "prod", "region": "us"},
		"dev-1": {"env": "dev"},
		"lab-1": {"env": "lab", "region": "ap"},
	} {
		mc := &hubv1alpha1.MemberCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: "configbundle-system", Name: name}},
		}
		if err := c.Create(t.Context(), mc); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// readerKubeconfig writes the kubeconfig of renderReader, bound to a ClusterRole that may get
// and list FleetBundles, MemberClusters, ClusterSets and ClusterSetBindings.
func readerKubeconfig(t *testing.T, cp *controlplane.ControlPlane, c client.Client) string {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: renderReader},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{hubv1alpha1.GroupVersion.Group},
			Resources: []string{"fleetbundles", "memberclusters", "clustersets", "clustersetbindings"},
			Verbs:     []string{"get", "list"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: renderReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: renderReader},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: renderReader}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := cp.AddUser(renderReader, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := controlplane.KubeconfigFor("hub", cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reader.kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// render runs `hub render args` against the hub as renderReader.
func (h *renderHub) render(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return run(t, append([]string{"render", "--hub-kubeconfig", h.kubeconfig}, args...)...)
}

// createFleetBundle creates the FleetBundle name in default.
func (h *renderHub) createFleetBundle(t *testing.T, name string, spec hubv1alpha1.FleetBundleSpec) *hubv1alpha1.FleetBundle {
	t.Helper()
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Spec: spec}
	if err := h.c.Create(t.Context(), fb); err != nil {
		t.Fatal(err)
	}
	return fb
}

// envIn selects the members whose env is one of envs.
func envIn(envs ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: envs}}}
}

// goTemplate is a GoTemplate spec of the message and the labels, for the members sel selects.
func goTemplate(sel *metav1.LabelSelector, message string, labels map[string]string) hubv1alpha1.FleetBundleSpec {
	return hubv1alpha1.FleetBundleSpec{ClusterSelector: sel, TemplateEngine: hubv1alpha1.TemplateEngineGoTemplate, Template: messageTemplate(message, labels)}
}

// documents splits render's stdout into its documents, by member: each must start with a
// "# member: NAME" line, and is the rest of it.
func documents(t *testing.T, stdout string) (members []string, docs map[string]string) {
	t.Helper()
	docs = map[string]string{}
	for _, doc := range strings.Split(stdout, "---\n") {
		first, rest, _ := strings.Cut(doc, "\n")
		name, ok := strings.CutPrefix(first, "# member: ")
		if !ok {
			t.Fatalf("a document does not start with # member: NAME:\n%s", doc)
		}
		members = append(members, name)
		docs[name] = rest
	}
	return members, docs
}

// bundleOf decodes a document and checks it is what the hub places: placement.Desired's
// ConfigBundle for the member.
func bundleOf(t *testing.T, doc string, fb *hubv1alpha1.FleetBundle, m template.Member) *configbundlev1alpha1.ConfigBundle {
	t.Helper()
	b := &configbundlev1alpha1.ConfigBundle{}
	if err := yaml.UnmarshalStrict([]byte(doc), b); err != nil {
		t.Fatalf("member %s: %v:\n%s", m.Name, err, doc)
	}
	want, err := placement.Desired(fb, m)
	if err != nil {
		t.Fatalf("member %s: %v", m.Name, err)
	}
	if b.APIVersion != "configbundle.dev/v1alpha1" || b.Kind != "ConfigBundle" || b.Name != want.Name || b.Namespace != want.Namespace ||
		!sameSpec(b.Spec, want.Spec) || fmt.Sprint(b.Labels) != fmt.Sprint(want.Labels) || fmt.Sprint(b.Annotations) != fmt.Sprint(want.Annotations) {
		t.Errorf("member %s: printed\n%s\nwant what the hub places: %+v", m.Name, doc, want)
	}
	return b
}

// sameSpec compares two bundle specs.
func sameSpec(a, b configbundlev1alpha1.ConfigBundleSpec) bool {
	return a.Message == b.Message && a.Immutable == b.Immutable && fmt.Sprint(a.Data) == fmt.Sprint(b.Data)
}

// TestRender runs hub render against a real hub API server, as a user that may only read.
func TestRender(t *testing.T) {
	h := startRenderHub(t)
	t.Run("per member", h.testPerMember)
	t.Run("a member fails to render", h.testRenderFailed)
	t.Run("--cluster", h.testCluster)
	t.Run("invalid definition", h.testInvalid)
	t.Run("no such FleetBundle", h.testUnknown)
	t.Run("None", h.testNone)
	t.Run("no member selected", h.testNoneSelected)
	t.Run("no ClusterSet bound", h.testUnbound)
	t.Run("read-only", h.testReadOnly)
	t.Run("-f FILE", h.testManifest) // after read-only: it tries a dry run as renderReader
	t.Run("target Secret", h.testSecretTarget)
}

// testSecretTarget: a FleetBundle with target Secret renders each member's ConfigBundle, which
// holds no value, and the Secret's keys with the SHA-256 of each value, never a value.
func (h *renderHub) testSecretTarget(t *testing.T) {
	source := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "pull", Labels: map[string]string{hubv1alpha1.SourceLabel: "true"}},
		Data:       map[string][]byte{"token": []byte("s3cr3t-value")},
	}
	if err := h.c.Create(t.Context(), source); err != nil {
		t.Fatal(err)
	}
	manifest := `apiVersion: hub.configbundle.dev/v1alpha1
kind: FleetBundle
metadata:
  name: pull-secret
spec:
  clusterSelector:
    matchLabels:
      env: dev
  dataFrom:
  - secretRef: {name: pull}
  template:
    spec:
      target: Secret
`
	code, stdout, stderr := run(t, "render", "--hub-kubeconfig", h.cp.KubeconfigPath, "-f", writeManifest(t, manifest))
	sum := sha256.Sum256([]byte("s3cr3t-value"))
	want := "# Secret default/pull-secret: token=sha256:" + hex.EncodeToString(sum[:]) + " (the SHA-256 of each value; values are never shown)\n"
	if code != exitOK || !strings.Contains(stdout, "target: Secret\n") || !strings.Contains(stdout, want) || strings.Contains(stdout+stderr, "s3cr3t") {
		t.Errorf("hub render -f of a target Secret: exit %d, stdout\n%s\nstderr %q; want its keys and hashes, no value", code, stdout, stderr)
	}
}

// writeManifest writes a manifest file and returns its path.
func writeManifest(t *testing.T, manifest string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleetbundle.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// previewManifest is a FleetBundle not applied: the dev members get "preview NAME".
const previewManifest = `# not applied yet
apiVersion: hub.configbundle.dev/v1alpha1
kind: FleetBundle
metadata:
  name: preview
spec:
  clusterSelector:
    matchLabels:
      env: dev
  templateEngine: GoTemplate
  template:
    spec:
      message: "preview {{ .Cluster.Name }}"
`

// testManifest: hub render -f renders a manifest not applied against the live members; the hub's
// API server validates it (as the admin) in a dry run that creates nothing, or, for renderReader
// who may not write FleetBundles, it is checked locally with a note; a manifest the CRD refuses,
// or with a misspelt field, is exit 1; a changed manifest of an existing FleetBundle renders its
// new spec.
func (h *renderHub) testManifest(t *testing.T) {
	path := writeManifest(t, previewManifest)
	code, stdout, stderr := h.render(t, "-f", path)
	if code != exitOK || !strings.Contains(stdout, "# member: dev-1\n") || !strings.Contains(stdout, "message: preview dev-1\n") ||
		!strings.Contains(stderr, "FleetBundle default/preview: not validated by the hub's API server") {
		t.Errorf("hub render -f (read-only user): exit %d, stdout\n%s\nstderr %q; want dev-1's preview and a note", code, stdout, stderr)
	}
	admin := func(args ...string) (int, string, string) {
		return run(t, append([]string{"render", "--hub-kubeconfig", h.cp.KubeconfigPath}, args...)...)
	}
	code, stdout, stderr = admin("-f", path)
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "message: preview dev-1\n") {
		t.Errorf("hub render -f (admin): exit %d, stdout\n%s\nstderr %q; want dev-1's preview, validated", code, stdout, stderr)
	}
	if err := h.c.Get(t.Context(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "preview"}, &hubv1alpha1.FleetBundle{}); !apierrors.IsNotFound(err) {
		t.Errorf("FleetBundle default/preview after hub render -f: %v; want none (a dry run)", err)
	}
	for _, tc := range []struct{ name, manifest, says string }{
		{"the CRD refuses", strings.Replace(previewManifest, "templateEngine: GoTemplate", "templateEngine: Jinja", 1), "the hub's API server refuses it"},
		{"a misspelt field", strings.Replace(previewManifest, "clusterSelector:", "clusterSelectr:", 1), "unknown field \"clusterSelectr\""},
		{"another kind", strings.Replace(previewManifest, "kind: FleetBundle", "kind: ConfigBundle", 1), "want apiVersion hub.configbundle.dev/v1alpha1, kind FleetBundle"},
		{"two documents", previewManifest + "---\n" + previewManifest, "want one FleetBundle, got 2 documents"},
		{"another namespace than -n", strings.Replace(previewManifest, "name: preview", "name: preview\n  namespace: apps", 1), `the manifest's namespace "apps" is not --namespace "default"`},
	} {
		args := []string{"-f", writeManifest(t, tc.manifest)}
		if strings.Contains(tc.name, "-n") {
			args = append(args, "-n", "default")
		}
		if code, stdout, stderr := admin(args...); code != exitFailure || stdout != "" || !strings.Contains(stderr, tc.says) {
			t.Errorf("hub render -f, %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", tc.name, code, stdout, stderr, tc.says)
		}
	}
	changed := strings.NewReplacer("name: preview", "name: partial", "env: dev", "env: prod", "preview {{", "changed {{").Replace(previewManifest)
	code, stdout, stderr = admin("-f", writeManifest(t, changed))
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "message: changed eu-1\n") || !strings.Contains(stdout, "message: changed us-1\n") {
		t.Errorf("hub render -f of an existing FleetBundle changed: exit %d, stdout\n%s\nstderr %q; want its new spec rendered, validated", code, stdout, stderr)
	}
}

// regional is a FleetBundle of the prod members, templated by region, with an override for eu.
func (h *renderHub) regional(t *testing.T) *hubv1alpha1.FleetBundle {
	t.Helper()
	spec := goTemplate(envIn("prod"), "endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}",
		map[string]string{"region": "{{ .Cluster.Labels.region }}"})
	spec.Template.Spec.Data = map[string]configbundlev1alpha1.DataValue{"LOG_LEVEL": "info"}
	spec.Overrides = []hubv1alpha1.TemplateOverride{{
		Name:            "eu",
		ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
		Data:            map[string]configbundlev1alpha1.DataValue{"LOG_LEVEL": "debug"},
		Annotations:     map[string]string{"owner": "team-{{ .Cluster.Labels.region }}"},
	}}
	return h.createFleetBundle(t, "regional", spec)
}

// testPerMember: two members with different labels get their own message, labels and data, as
// placement.Desired renders them, in the documented format.
func (h *renderHub) testPerMember(t *testing.T) {
	fb := h.regional(t)
	code, stdout, stderr := h.render(t, "regional")
	if code != exitOK || stderr != "" {
		t.Fatalf("hub render regional: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	members, docs := documents(t, stdout)
	if strings.Join(members, ",") != "eu-1,us-1" {
		t.Fatalf("rendered for %q, want eu-1 and us-1 (env=prod), sorted", members)
	}
	for _, tc := range []struct{ member, region, message, logLevel, owner string }{
		{"eu-1", "eu", "endpoint=https://api.eu.example.com cluster=eu-1", "debug", "team-eu"},
		{"us-1", "us", "endpoint=https://api.us.example.com cluster=us-1", "info", ""},
	} {
		b := bundleOf(t, docs[tc.member], fb, template.Member{Name: tc.member, Labels: map[string]string{"env": "prod", "region": tc.region}})
		if b.Spec.Message != tc.message || b.Labels["region"] != tc.region || b.Spec.Data["LOG_LEVEL"] != configbundlev1alpha1.DataValue(tc.logLevel) ||
			b.Annotations["owner"] != tc.owner || b.Labels[hubv1alpha1.FleetBundleLabel] != "default.regional" {
			t.Errorf("member %s: %+v; want message %q, label region=%s, LOG_LEVEL=%s, owner %q", tc.member, b, tc.message, tc.region, tc.logLevel, tc.owner)
		}
	}
	uid := fb.UID
	d := template.DefinitionOf(fb)
	us1, err := placement.Desired(fb, template.Member{Name: "us-1", Labels: map[string]string{"env": "prod", "region": "us"}})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`# member: us-1
apiVersion: configbundle.dev/v1alpha1
kind: ConfigBundle
metadata:
  annotations:
    hub.configbundle.dev/fleet-bundle-render-hash: %s
    hub.configbundle.dev/fleet-bundle-template-hash: %s
    hub.configbundle.dev/fleet-bundle-uid: %s
  labels:
    hub.configbundle.dev/fleet-bundle: default.regional
    region: us
  name: regional
  namespace: default
spec:
  data:
    LOG_LEVEL: info
  immutable: false
  message: endpoint=https://api.us.example.com cluster=us-1
`, us1.Annotations[hubv1alpha1.FleetBundleRenderHashAnnotation], template.Hash(&d), uid)
	if !strings.HasSuffix(stdout, "\n---\n"+want) {
		t.Errorf("hub render regional printed\n%s\nwant it to end with ---, then\n%s", stdout, want)
	}
}

// testRenderFailed: a selected member without the label the template needs gets its error, exit
// 1, and the others are still printed.
func (h *renderHub) testRenderFailed(t *testing.T) {
	fb := h.createFleetBundle(t, "partial", goTemplate(envIn("prod", "dev"), "region={{ .Cluster.Labels.region }}", nil))
	code, stdout, stderr := h.render(t, "partial")
	if code != exitFailure || !strings.Contains(stderr, "FleetBundle default/partial: 1 of 3 members failed to render: dev-1") {
		t.Errorf("hub render partial: exit %d, stderr %q; want exit 1 naming dev-1", code, stderr)
	}
	members, docs := documents(t, stdout)
	if len(members) != 3 || !strings.HasPrefix(members[0], "dev-1: render failed: ") || strings.Join(members[1:], ",") != "eu-1,us-1" {
		t.Fatalf("printed %q, want dev-1's error, then eu-1 and us-1", members)
	}
	failure := strings.SplitN(stdout, "\n", 2)[0]
	if !strings.HasPrefix(failure, "# member: dev-1: render failed: template: spec.template.spec.message") || !strings.Contains(failure, `map has no entry for key "region"`) {
		t.Errorf("dev-1's line is %q; want its render error naming the field and the missing label", failure)
	}
	if doc := docs[members[0]]; doc != "" {
		t.Errorf("dev-1 failed but printed:\n%s", doc)
	}
	for _, region := range []string{"eu", "us"} {
		b := bundleOf(t, docs[region+"-1"], fb, template.Member{Name: region + "-1", Labels: map[string]string{"env": "prod", "region": region}})
		if b.Spec.Message != "region="+region {
			t.Errorf("member %s-1: message %q, want region=%s", region, b.Spec.Message, region)
		}
	}
}

// testCluster: --cluster renders for one member: selected, failing, not selected (rendered and
// said), or absent (exit 1).
func (h *renderHub) testCluster(t *testing.T) {
	code, stdout, stderr := h.render(t, "partial", "--cluster", "us-1")
	if members, _ := documents(t, stdout); code != exitOK || stderr != "" || strings.Join(members, ",") != "us-1" || !strings.Contains(stdout, "message: region=us\n") {
		t.Errorf("hub render partial --cluster us-1: exit %d, stderr %q, stdout:\n%s\nwant us-1 alone", code, stderr, stdout)
	}
	code, stdout, stderr = h.render(t, "partial", "--cluster", "dev-1")
	if code != exitFailure || !strings.HasPrefix(stdout, "# member: dev-1: render failed: ") || strings.Contains(stdout, "---") ||
		!strings.Contains(stderr, "1 of 1 members failed to render: dev-1") {
		t.Errorf("hub render partial --cluster dev-1: exit %d, stderr %q, stdout:\n%s\nwant dev-1's error alone, exit 1", code, stderr, stdout)
	}
	code, stdout, stderr = h.render(t, "regional", "-n", "default", "-cluster=lab-1")
	if code != exitOK || !strings.HasPrefix(stdout, "# member: lab-1 (not selected by spec.clusterSelector within the bound ClusterSets: the hub places nothing there)\n") ||
		!strings.Contains(stdout, "message: endpoint=https://api.ap.example.com cluster=lab-1\n") ||
		!strings.Contains(stderr, "MemberCluster lab-1 is not selected by FleetBundle default/regional") {
		t.Errorf("hub render regional --cluster lab-1: exit %d, stderr %q, stdout:\n%s\nwant lab-1 rendered, said not selected", code, stderr, stdout)
	}
	code, stdout, stderr = h.render(t, "regional", "--cluster", "ghost")
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "no MemberCluster ghost") {
		t.Errorf("hub render regional --cluster ghost: exit %d, stdout %q, stderr %q; want exit 1, no MemberCluster ghost", code, stdout, stderr)
	}
}

// testInvalid: a definition that renders for no member (InvalidTemplate, InvalidSelector) is
// said, exit 1, nothing printed.
func (h *renderHub) testInvalid(t *testing.T) {
	h.createFleetBundle(t, "unparsed", goTemplate(envIn("prod"), "cluster={{ .Cluster.Name", nil))
	h.createFleetBundle(t, "looping", goTemplate(envIn("prod"), "{{ range $k, $v := .Cluster.Labels }}{{ $k }}{{ end }}", nil))
	badOverride := goTemplate(envIn("prod"), "ok", nil)
	badOverride.Overrides = []hubv1alpha1.TemplateOverride{{Name: "bad", ClusterSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}, Message: ptr.To("x")}}
	h.createFleetBundle(t, "bad-override", badOverride)
	h.createFleetBundle(t, "bad-selector", goTemplate(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}, "ok", nil))
	for name, says := range map[string]string{
		"unparsed":     "FleetBundle default/unparsed: InvalidTemplate: template: spec.template.spec.message:1: unclosed action",
		"looping":      "FleetBundle default/looping: InvalidTemplate: spec.template.spec.message: range is not allowed in a template",
		"bad-override": "FleetBundle default/bad-override: InvalidTemplate: spec.overrides[bad].clusterSelector",
		"bad-selector": "FleetBundle default/bad-selector: InvalidSelector: invalid clusterSelector",
	} {
		code, stdout, stderr := h.render(t, name)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, says) {
			t.Errorf("hub render %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", name, code, stdout, stderr, says)
		}
	}
}

// testUnknown: a FleetBundle that does not exist, or not in that namespace, is a failure.
func (h *renderHub) testUnknown(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"ghost"}, "no FleetBundle ghost in namespace default"},
		{[]string{"regional", "-n", "apps"}, "no FleetBundle regional in namespace apps"},
	} {
		code, stdout, stderr := h.render(t, tc.args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "hub render: "+tc.says) {
			t.Errorf("hub render %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.says)
		}
	}
}

// testNone: without a template engine, "{{" is placed literally, the same for every member.
func (h *renderHub) testNone(t *testing.T) {
	for _, engine := range []hubv1alpha1.TemplateEngine{hubv1alpha1.TemplateEngineNone, ""} {
		name := "literal-" + strings.ToLower(string(engine)+"unset")
		fb := h.createFleetBundle(t, name, hubv1alpha1.FleetBundleSpec{
			ClusterSelector: &metav1.LabelSelector{}, TemplateEngine: engine, Template: messageTemplate("cluster={{ .Cluster.Name }}", nil),
		})
		code, stdout, stderr := h.render(t, name)
		members, docs := documents(t, stdout)
		if code != exitOK || stderr != "" || strings.Join(members, ",") != "dev-1,eu-1,lab-1,us-1" {
			t.Fatalf("hub render %s: exit %d, stderr %q, stdout:\n%s\nwant every member", name, code, stderr, stdout)
		}
		for _, m := range members {
			b := bundleOf(t, docs[m], fb, template.Member{Name: m})
			if b.Spec.Message != "cluster={{ .Cluster.Name }}" || b.Annotations[hubv1alpha1.FleetBundleRenderHashAnnotation] != "" {
				t.Errorf("%s, member %s: message %q, annotations %v; want {{ placed literally, no render hash", name, m, b.Spec.Message, b.Annotations)
			}
		}
	}
}

// testNoneSelected: a FleetBundle that selects no member prints nothing, says so, exit 0.
func (h *renderHub) testNoneSelected(t *testing.T) {
	h.createFleetBundle(t, "nobody", goTemplate(envIn("none"), "x", nil))
	h.createFleetBundle(t, "unselective", hubv1alpha1.FleetBundleSpec{Template: messageTemplate("x", nil)}) // no clusterSelector
	for _, name := range []string{"nobody", "unselective"} {
		code, stdout, stderr := h.render(t, name)
		if code != exitOK || stdout != "" || stderr != "FleetBundle default/"+name+" selects no MemberCluster (spec.clusterSelector, among the members of the ClusterSets bound to namespace default): nothing to render\n" {
			t.Errorf("hub render %s: exit %d, stdout %q, stderr %q; want exit 0, nothing printed, said on stderr", name, code, stdout, stderr)
		}
	}
}

// testUnbound: a FleetBundle in a namespace where no ClusterSet is bound places nothing, as its
// Ready condition says (NoClusterSetBinding): render says so, exit 1, even for --cluster.
func (h *renderHub) testUnbound(t *testing.T) {
	if err := h.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unbound"}}); err != nil {
		t.Fatal(err)
	}
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: "unbound", Name: "orphan"}, Spec: goTemplate(envIn("prod"), "x", nil)}
	if err := h.c.Create(t.Context(), fb); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"orphan", "-n", "unbound"}, {"orphan", "-n", "unbound", "--cluster", "eu-1"}} {
		code, stdout, stderr := h.render(t, args...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "FleetBundle unbound/orphan: NoClusterSetBinding: No ClusterSet is bound to namespace unbound") {
			t.Errorf("hub render %s: exit %d, stdout %q, stderr %q; want exit 1 saying NoClusterSetBinding", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// testReadOnly: every render above ran as a user that may only get and list, and wrote nothing:
// the API server's audit log holds no write request of that user, not even a refused one.
func (h *renderHub) testReadOnly(t *testing.T) {
	writes, err := h.cp.Writes()
	if err != nil {
		t.Fatal(err)
	}
	admin := 0
	for _, w := range writes {
		if w.User == renderReader {
			t.Errorf("hub render wrote: %+v", w)
		} else {
			admin++
		}
	}
	if admin == 0 {
		t.Fatal("the audit log holds no write at all, not even the tests' own: it proves nothing")
	}
}
