package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The chart config/chart/configbundle-hub is generated from config/default, config/sharded and
// config/prometheus by hack/helmgen (`make helm`). These tests run the real helm binary on it
// (built by hack/offline/helmbin.sh from the Go module proxy, named by $HELM): it lints, it is what the
// generator makes of the kustomizations now, it renders exactly their objects, and a real API
// server accepts what it renders.

const (
	// release is the release name of the tests' `helm template`.
	release = "configbundle-hub"
	// chartVersion is the chart's version, which its helm.sh/chart label names.
	chartVersion = "0.1.0"
)

// chartDir is the generated chart.
var chartDir = filepath.Join(configDir, "chart", hubName)

// helmLabels are the labels the chart adds to config/default's objects, on their metadata only
// (never on a selector or a pod template), with the values they must have in the tests'
// renders: the only difference the equivalence tests ignore.
var helmLabels = map[string]string{
	"helm.sh/chart":                hubName + "-" + chartVersion,
	"app.kubernetes.io/managed-by": "Helm",
	"app.kubernetes.io/instance":   release,
	"app.kubernetes.io/version":    "dev",
}

// helmBinary is $HELM; the test fails, rather than skipping, without it.
func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		t.Fatal("HELM is not set: it must name the helm binary (v3.22.0). `bash hack/offline/helmbin.sh` builds it from the Go " +
			"module proxy (cached) and prints its path; `make test` sets HELM from it. For example: " +
			"HELM=$(bash hack/offline/helmbin.sh) go test ./test/manifests/ -run 'Helm|Chart'")
	}
	return h
}

// runHelm runs helm with args, with its cache, config and data in a temporary directory and no
// cluster to talk to, and returns its stdout; a failure is returned with helm's stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runHelmOn(t, filepath.Join(t.TempDir(), "kubeconfig"), args...)
}

// runHelmOn is runHelm on the cluster of kubeconfig.
func runHelmOn(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), helmBinary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New("helm " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String())
	}
	return stdout.String(), nil
}

// helmTemplate renders the chart into namespace ns, CRDs included, with --set values.
func helmTemplate(t *testing.T, ns string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", ns, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeYAML(t, out)
}

// decodeYAML decodes a multi-document YAML stream, skipping empty documents.
func decodeYAML(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if s := strings.TrimSpace(string(raw)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		objs = append(objs, u)
	}
}

// withoutHelmLabels returns copies of objs without the labels of helmLabels, failing the test if
// an object lacks one of them or has it with another value. CRDs come from the chart's crds/
// directory, which Helm does not template: they must have none of them.
func withoutHelmLabels(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, u := range objs {
		u = u.DeepCopy()
		labels := u.GetLabels()
		for k, v := range helmLabels {
			if u.GetKind() == "CustomResourceDefinition" {
				g.Expect(labels).NotTo(HaveKey(k), id(u))
				continue
			}
			g.Expect(labels).To(HaveKeyWithValue(k, v), id(u))
			delete(labels, k)
		}
		u.SetLabels(labels)
		out = append(out, u)
	}
	return out
}

// without returns objs but those of kind k.
func without(objs []*unstructured.Unstructured, k string) []*unstructured.Unstructured {
	return slices.DeleteFunc(slices.Clone(objs), func(u *unstructured.Unstructured) bool { return u.GetKind() == k })
}

// expectSameObjects fails unless chart (normalised by withoutHelmLabels) and kustomize hold the
// same objects, field for field.
func expectSameObjects(t *testing.T, chart, kustomize []*unstructured.Unstructured) {
	t.Helper()
	chart = withoutHelmLabels(t, chart)
	NewWithT(t).Expect(ids(chart)).To(ConsistOf(ids(kustomize)))
	for _, want := range kustomize {
		got := find(t, chart, want.GetKind(), want.GetNamespace(), want.GetName())
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("%s differs between kustomize and the chart (-kustomize +chart):\n%s", id(want), diff)
		}
	}
}

func hasPrometheus(t *testing.T) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(configDir, "prometheus", "kustomization.yaml"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestHelmLint(t *testing.T) {
	for _, set := range []string{"", "sharded=true,replicaCount=3", "serviceMonitor.enabled=true,prometheusRule.enabled=true",
		"podAnnotations.a=b,podLabels.team=platform,serviceAccount.annotations.a=b,priorityClassName=platform-critical,logLevel=debug"} {
		t.Run("values "+set, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir}
			if set != "" {
				args = append(args, "--set", set)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			NewWithT(t).Expect(out).To(ContainSubstring("0 chart(s) failed"))
		})
	}
}

// TestChartIsGenerated fails when config/ changed without `make helm`: the checked-in chart must be
// exactly what hack/helmgen generates now.
func TestChartIsGenerated(t *testing.T) {
	g := NewWithT(t)
	goBin, err := exec.LookPath("go")
	g.Expect(err).NotTo(HaveOccurred(), "the go command runs the generator")
	out := filepath.Join(t.TempDir(), "chart")
	cmd := exec.CommandContext(t.Context(), goBin, "run", "./hack/helmgen", "-config", configDir, "-out", out)
	cmd.Dir = filepath.Dir(configDir)
	output, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go run ./hack/helmgen: %s", output)

	generated, checkedIn := readTree(t, out), readTree(t, chartDir)
	g.Expect(slices.Sorted(maps.Keys(checkedIn))).To(Equal(slices.Sorted(maps.Keys(generated))),
		"the files of %s are not those hack/helmgen generates: run make helm", chartDir)
	for p, want := range generated {
		if diff := cmp.Diff(want, checkedIn[p]); diff != "" {
			t.Errorf("%s is stale (-generated +checked in), run make helm:\n%s", p, diff)
		}
	}
}

// readTree maps the paths of the files under dir (slash-separated, relative to it) to their content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestHelmMatchesKustomize proves `helm template` and `kubectl kustomize` equivalent: with default
// values the chart renders every object of config/default but its Namespace (Helm installs into
// the release's), field for field, the Deployment and every RBAC object included; sharded, those
// of config/sharded; with the monitoring objects on, config/prometheus's too. The only difference
// allowed is helmLabels on the objects' metadata.
func TestHelmMatchesKustomize(t *testing.T) {
	t.Run("default values: config/default", func(t *testing.T) {
		chart := helmTemplate(t, namespace)
		kustomize := without(render(t, "default"), "Namespace")
		// The objects that must be equivalent, named: the Deployment and every RBAC object.
		g := NewWithT(t)
		for _, k := range []string{"Deployment", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} {
			g.Expect(slices.ContainsFunc(kustomize, func(u *unstructured.Unstructured) bool { return u.GetKind() == k })).To(BeTrue(), k)
		}
		expectSameObjects(t, chart, kustomize)
	})
	// The tenancy model ships with the chart too: the bind policy and its binding, the editor's
	// role (aggregated to edit and admin) and the set administrator's.
	t.Run("default values: the tenancy roles and the bind policy", func(t *testing.T) {
		chart := asServed(withoutHelmLabels(t, helmTemplate(t, namespace)))
		testTenancyObjects(t, chart)
		sharded := asServed(withoutHelmLabels(t, helmTemplate(t, namespace, "sharded=true,replicaCount=3")))
		for _, k := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			find(t, sharded, k, "", hubv1alpha1.ClusterSetBindPolicyName)
			find(t, sharded, k, "", hubv1alpha1.ApprovalPolicyName)
		}
		find(t, sharded, "ClusterRole", "", hubv1alpha1.FleetBundleEditorRole)
		find(t, sharded, "ClusterRole", "", hubv1alpha1.ClusterSetAdminRole)
	})
	t.Run("sharded=true,replicaCount=3: config/sharded", func(t *testing.T) {
		chart := helmTemplate(t, namespace, "sharded=true,replicaCount=3")
		kustomize := without(render(t, "sharded"), "Namespace")
		find(t, kustomize, "PodDisruptionBudget", namespace, hubName)
		d := convert[appsv1.Deployment](t, find(t, kustomize, "Deployment", namespace, hubName))
		g := NewWithT(t)
		g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--sharded"))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--leader-elect"))
		expectSameObjects(t, chart, kustomize)
	})
	t.Run("serviceMonitor and prometheusRule enabled: config/prometheus", func(t *testing.T) {
		if !hasPrometheus(t) {
			t.Skip("config/prometheus does not exist: the chart has no monitoring objects")
		}
		chart := helmTemplate(t, namespace, "serviceMonitor.enabled=true,prometheusRule.enabled=true")
		prom := render(t, "prometheus")
		find(t, prom, "ServiceMonitor", namespace, hubName)
		find(t, prom, "PrometheusRule", namespace, hubName)
		expectSameObjects(t, chart, slices.Concat(without(render(t, "default"), "Namespace"), prom))
	})
}

// TestHelmValues checks what each value does beyond the defaults.
func TestHelmValues(t *testing.T) {
	deployment := func(t *testing.T, set ...string) *appsv1.Deployment {
		t.Helper()
		return convert[appsv1.Deployment](t, find(t, helmTemplate(t, namespace, set...), "Deployment", namespace, hubName))
	}
	t.Run("image, pull policy and pull secrets", func(t *testing.T) {
		g := NewWithT(t)
		pod := deployment(t, "image.repository=registry.example.com/hub,image.tag=v1.2.3,image.pullPolicy=Always",
			"imagePullSecrets[0].name=regcred").Spec.Template.Spec
		g.Expect(pod.Containers[0].Image).To(Equal("registry.example.com/hub:v1.2.3"))
		g.Expect(pod.Containers[0].ImagePullPolicy).To(Equal(corev1.PullAlways))
		g.Expect(pod.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "regcred"}}))
		digest := "sha256:" + strings.Repeat("ab", 32)
		g.Expect(deployment(t, "image.digest="+digest).Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/configbundle/hub@" + digest))
	})
	t.Run("extraArgs are appended", func(t *testing.T) {
		args := deployment(t, "extraArgs={--probe-interval=30s,--resync-period=5m}").Spec.Template.Spec.Containers[0].Args
		base := convert[appsv1.Deployment](t, find(t, render(t, "default"), "Deployment", namespace, hubName)).Spec.Template.Spec.Containers[0].Args
		NewWithT(t).Expect(args).To(Equal(append(slices.Clone(base), "--probe-interval=30s", "--resync-period=5m")))
	})
	t.Run("resources and scheduling", func(t *testing.T) {
		g := NewWithT(t)
		pod := deployment(t, "resources.limits.memory=1Gi,nodeSelector.role=hub,tolerations[0].key=hub,tolerations[0].operator=Exists",
			"affinity=null").Spec.Template.Spec
		g.Expect(pod.Containers[0].Resources.Limits.Memory().String()).To(Equal("1Gi"))
		g.Expect(pod.Containers[0].Resources.Requests.Cpu().String()).To(Equal("100m"), "the other defaults stay")
		g.Expect(pod.NodeSelector).To(Equal(map[string]string{"role": "hub"}))
		g.Expect(pod.Tolerations).To(Equal([]corev1.Toleration{{Key: "hub", Operator: corev1.TolerationOpExists}}))
		g.Expect(pod.Affinity).To(BeNil())
	})
	t.Run("PodDisruptionBudget", func(t *testing.T) {
		g := NewWithT(t)
		hasPDB := func(set ...string) bool {
			return slices.ContainsFunc(helmTemplate(t, namespace, set...), func(u *unstructured.Unstructured) bool {
				return u.GetKind() == "PodDisruptionBudget"
			})
		}
		g.Expect(hasPDB()).To(BeFalse(), "leader election: none, as config/default")
		g.Expect(hasPDB("sharded=true")).To(BeTrue(), "sharded: config/sharded's")
		g.Expect(hasPDB("sharded=true", "podDisruptionBudget.enabled=false")).To(BeFalse())
		objs := helmTemplate(t, namespace, "podDisruptionBudget.enabled=true,podDisruptionBudget.maxUnavailable=50%")
		pdb := convert[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", namespace, hubName))
		g.Expect(pdb.Spec.MaxUnavailable.String()).To(Equal("50%"))
	})
	t.Run("metrics Service", func(t *testing.T) {
		g := NewWithT(t)
		svc := convert[corev1.Service](t, find(t, helmTemplate(t, namespace, "metrics.service.port=9443"), "Service", namespace, hubName+"-metrics"))
		g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(9443))
		g.Expect(without(helmTemplate(t, namespace, "metrics.service.enabled=false"), "CustomResourceDefinition")).
			NotTo(ContainElement(WithTransform(id, HavePrefix("Service/"))))
	})
	t.Run("monitoring", func(t *testing.T) {
		if !hasPrometheus(t) {
			t.Skip("config/prometheus does not exist: the chart has no monitoring objects")
		}
		g := NewWithT(t)
		objs := helmTemplate(t, namespace, "serviceMonitor.enabled=true,serviceMonitor.labels.release=prom",
			"prometheusRule.enabled=true,prometheusRule.labels.release=prom")
		for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
			g.Expect(find(t, objs, k, namespace, hubName).GetLabels()).To(HaveKeyWithValue("release", "prom"), k)
		}
		_, err := runHelm(t, "template", release, chartDir, "--set", "serviceMonitor.enabled=true,metrics.service.enabled=false")
		g.Expect(err).To(MatchError(ContainSubstring("serviceMonitor.enabled needs metrics.service.enabled")))
	})
	t.Run("pod annotations and labels", func(t *testing.T) {
		g := NewWithT(t)
		d := deployment(t, "podAnnotations.example\\.com/owner=platform,podLabels.team=platform")
		g.Expect(d.Spec.Template.Annotations).To(Equal(map[string]string{"example.com/owner": "platform"}))
		g.Expect(d.Spec.Template.Labels).To(Equal(map[string]string{"app.kubernetes.io/name": hubName, "team": "platform"}))
		g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": hubName}), "the selector stays")
		g.Expect(d.Annotations).To(BeEmpty(), "on the pods, not on the Deployment")
		_, err := runHelm(t, "template", release, chartDir, "--set", "podLabels.app\\.kubernetes\\.io/name=other")
		g.Expect(err).To(MatchError(ContainSubstring("podLabels may not set app.kubernetes.io/name: it is a label of the Deployment's selector")))
	})
	t.Run("serviceAccount.annotations", func(t *testing.T) {
		const role = "arn:aws:iam::111122223333:role/configbundle-hub"
		objs := helmTemplate(t, namespace, "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn="+role)
		sa := find(t, objs, "ServiceAccount", namespace, hubName)
		NewWithT(t).Expect(sa.GetAnnotations()).To(Equal(map[string]string{"eks.amazonaws.com/role-arn": role}))
		NewWithT(t).Expect(convert[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, hubName)).Spec.Template.Spec.ServiceAccountName).
			To(Equal(sa.GetName()), "the ServiceAccount the pods run as")
	})
	t.Run("priorityClassName and topologySpreadConstraints", func(t *testing.T) {
		g := NewWithT(t)
		pod := deployment(t, "priorityClassName=platform-critical",
			"topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
			"topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/name="+hubName).Spec.Template.Spec
		g.Expect(pod.PriorityClassName).To(Equal("platform-critical"))
		g.Expect(pod.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": hubName}},
		}}))
	})
	t.Run("logLevel is the hub's --zap-log-level", func(t *testing.T) {
		g := NewWithT(t)
		base := convert[appsv1.Deployment](t, find(t, render(t, "default"), "Deployment", namespace, hubName)).Spec.Template.Spec.Containers[0].Args
		g.Expect(base).NotTo(ContainElement(HavePrefix("--zap-log-level")), "the default passes no level, as config/default")
		for level, enabled := range map[string]zapcore.Level{"debug": zapcore.DebugLevel, "error": zapcore.ErrorLevel, "2": zapcore.Level(-2)} {
			args := deployment(t, "logLevel="+level, "extraArgs={--probe-interval=30s}").Spec.Template.Spec.Containers[0].Args
			g.Expect(args).To(Equal(append(slices.Clone(base), "--zap-log-level="+level, "--probe-interval=30s")), "before extraArgs, which may override it")
			// The flag is zap's, as the hub binds it (hub/main.go), and sets that level.
			fs := flag.NewFlagSet("hub", flag.ContinueOnError)
			var zapOpts zap.Options
			zapOpts.BindFlags(fs)
			g.Expect(fs.Parse(args[len(args)-2 : len(args)-1])).To(Succeed())
			g.Expect(zapOpts.Level).NotTo(BeNil())
			g.Expect(zapOpts.Level.Enabled(enabled)).To(BeTrue(), level)
			g.Expect(zapOpts.Level.Enabled(enabled-1)).To(BeFalse(), level)
		}
		_, err := runHelm(t, "template", release, chartDir, "--set", "logLevel=verbose")
		g.Expect(err).To(MatchError(ContainSubstring("logLevel")), "the schema refuses a level zap does not know")
	})
	t.Run("sharded refuses --leader-elect in extraArgs", func(t *testing.T) {
		g := NewWithT(t)
		for _, arg := range []string{"--leader-elect", "--leader-elect=true"} {
			_, err := runHelm(t, "template", release, chartDir, "--set", "sharded=true,replicaCount=3", "--set", "extraArgs={"+arg+"}")
			g.Expect(err).To(MatchError(ContainSubstring("sharded: true runs the hub with --sharded, which it refuses together with --leader-elect")), arg)
			g.Expect(err).To(MatchError(ContainSubstring("remove --leader-elect from extraArgs")), arg)
		}
		_, err := runHelm(t, "template", release, chartDir, "--set", "extraArgs={--sharded}")
		g.Expect(err).To(MatchError(ContainSubstring("extraArgs has --sharded")), "and --sharded without sharded: true")
		g.Expect(deployment(t, "sharded=true", "extraArgs={--leader-election-namespace=x}").Spec.Template.Spec.Containers[0].Args).
			To(ContainElement("--sharded"), "a flag that only begins alike is no --leader-elect")
	})
	t.Run("the schema refuses a misspelt value", func(t *testing.T) {
		_, err := runHelm(t, "template", release, chartDir, "--set", "shard=true")
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("shard")))
	})
	t.Run("another namespace", func(t *testing.T) {
		g := NewWithT(t)
		const ns = "hub-helm"
		objs := without(helmTemplate(t, ns, "sharded=true", "serviceMonitor.enabled=true,prometheusRule.enabled=true"), "CustomResourceDefinition")
		for _, u := range objs {
			switch u.GetKind() {
			case "ClusterRole", "ClusterRoleBinding":
				g.Expect(u.GetNamespace()).To(BeEmpty(), id(u))
			case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding": // see unknownClusterScoped
			default:
				g.Expect(u.GetNamespace()).To(Equal(ns), id(u))
			}
			raw, err := u.MarshalJSON()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).NotTo(ContainSubstring(namespace), "%s still names config/default's namespace", id(u))
		}
		for _, u := range []*unstructured.Unstructured{find(t, objs, "RoleBinding", ns, hubName), find(t, objs, "ClusterRoleBinding", "", hubName)} {
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			g.Expect(subjects).To(ConsistOf(HaveKeyWithValue("namespace", ns)), id(u))
		}
	})
}

// monitoringCRDs are minimal CRDs of the Prometheus Operator's ServiceMonitor and PrometheusRule
// (monitoring.coreos.com/v1), whose real CRDs are not available offline: they type the fields
// config/prometheus uses as the real ones do and keep any other field, so that the API server
// judges the objects' metadata, scope and those fields.
func monitoringCRDs() []*apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	labels := apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}
	open := func(required []string, props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Required: required, Properties: props, XPreserveUnknownFields: ptr.To(true)}
	}
	list := func(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	}
	serviceMonitor := open([]string{"selector"}, map[string]apiextensionsv1.JSONSchemaProps{
		"selector": open(nil, map[string]apiextensionsv1.JSONSchemaProps{"matchLabels": labels}),
		"endpoints": list(open(nil, map[string]apiextensionsv1.JSONSchemaProps{
			"port": str, "path": str, "bearerTokenFile": str,
			"scheme":    {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"http"`)}, {Raw: []byte(`"https"`)}}},
			"interval":  {Type: "string", Pattern: `^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`},
			"tlsConfig": open(nil, map[string]apiextensionsv1.JSONSchemaProps{"insecureSkipVerify": {Type: "boolean"}, "serverName": str}),
		})),
	})
	prometheusRule := open(nil, map[string]apiextensionsv1.JSONSchemaProps{
		"groups": list(open([]string{"name"}, map[string]apiextensionsv1.JSONSchemaProps{
			"name": str,
			"rules": list(open([]string{"expr"}, map[string]apiextensionsv1.JSONSchemaProps{
				"alert": str, "record": str, "for": str, "labels": labels, "annotations": labels,
				"expr": {XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}},
			})),
		})),
	})
	crd := func(kind, plural string, spec apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", Required: []string{"spec"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec},
					}},
				}},
			},
		}
	}
	return []*apiextensionsv1.CustomResourceDefinition{
		crd("ServiceMonitor", "servicemonitors", serviceMonitor),
		crd("PrometheusRule", "prometheusrules", prometheusRule),
	}
}

// TestHelmServerAcceptsChart installs, for real, a namespace other than config/default's (enforcing
// the restricted Pod Security Standard, as config/default's does), the chart's CRDs and minimal
// monitoring CRDs, then server-side applies as a dry run every object the chart renders into it,
// with default values, sharded, and with every optional object and value on.
func TestHelmServerAcceptsChart(t *testing.T) {
	const ns, priorityClass = "hub-helm", "platform-critical"
	cp := controlPlane(t, "dry")
	c := adminClient(t, cp)
	g := NewWithT(t)

	var prerequisites []*unstructured.Unstructured
	nsObj := &unstructured.Unstructured{}
	nsObj.SetAPIVersion("v1")
	nsObj.SetKind("Namespace")
	nsObj.SetName(ns)
	nsObj.SetLabels(map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	prerequisites = append(prerequisites, nsObj)
	for _, crd := range monitoringCRDs() {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: obj}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		prerequisites = append(prerequisites, u)
	}

	renders := map[string][]string{
		"default values": nil,
		"sharded":        {"sharded=true,replicaCount=3"},
		"everything on": {
			"serviceMonitor.enabled=true,prometheusRule.enabled=true,serviceMonitor.labels.release=prom,prometheusRule.labels.release=prom",
			"image.tag=v1.2.3,image.pullPolicy=IfNotPresent,imagePullSecrets[0].name=regcred,extraArgs={--probe-interval=30s}",
			"podDisruptionBudget.enabled=true,nodeSelector.role=hub,tolerations[0].key=hub,tolerations[0].operator=Exists",
			"podAnnotations.example\\.com/owner=platform,podLabels.team=platform,serviceAccount.annotations.example\\.com/role=hub",
			"priorityClassName=" + priorityClass + ",logLevel=debug",
			"topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
		},
	}
	objs := map[string][]*unstructured.Unstructured{}
	for name, set := range renders {
		objs[name] = helmTemplate(t, ns, set...)
		prerequisites = append(prerequisites, objs[name]...) // the CRDs among them
	}
	installPrerequisites(t, c, prerequisites)
	// The priorityClassName of "everything on" names a PriorityClass that exists, as admission requires.
	g.Expect(c.Create(t.Context(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClass}, Value: 1000})).To(Succeed())

	for _, name := range slices.Sorted(maps.Keys(renders)) {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			kinds := map[string]bool{}
			for _, u := range without(objs[name], "CustomResourceDefinition") {
				kinds[u.GetKind()] = true
				g.Expect(apply(t.Context(), c, u, client.DryRunAll)).To(Succeed(), id(u))
			}
			if name == "everything on" && hasPrometheus(t) {
				g.Expect(kinds).To(HaveKey("ServiceMonitor"))
				g.Expect(kinds).To(HaveKey("PrometheusRule"))
			}
		})
	}

	// The ServiceMonitor scrapes the metrics Service: it selects it, by a port it has.
	t.Run("the ServiceMonitor selects the metrics Service", func(t *testing.T) {
		if !hasPrometheus(t) {
			t.Skip("config/prometheus does not exist: the chart has no monitoring objects")
		}
		g := NewWithT(t)
		rendered := objs["everything on"]
		svc := convert[corev1.Service](t, find(t, rendered, "Service", ns, hubName+"-metrics"))
		sm := find(t, rendered, "ServiceMonitor", ns, hubName)
		selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		g.Expect(selector).NotTo(BeEmpty())
		for k, v := range selector {
			g.Expect(svc.Labels).To(HaveKeyWithValue(k, v))
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		g.Expect(endpoints).NotTo(BeEmpty())
		for _, e := range endpoints {
			g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Name", e.(map[string]any)["port"])))
		}
	})

	// The dry runs are strict, the monitoring CRDs' typed fields included.
	t.Run("control: a mistyped ServiceMonitor field is refused", func(t *testing.T) {
		if !hasPrometheus(t) {
			t.Skip("config/prometheus does not exist: the chart has no monitoring objects")
		}
		u := find(t, objs["everything on"], "ServiceMonitor", ns, hubName).DeepCopy()
		endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
		endpoints[0].(map[string]any)["scheme"] = "ftp"
		NewWithT(t).Expect(unstructured.SetNestedSlice(u.Object, endpoints, "spec", "endpoints")).To(Succeed())
		NewWithT(t).Expect(apply(t.Context(), c, u, client.DryRunAll)).To(MatchError(ContainSubstring("scheme")))
	})
	// helm itself installs the chart for real (its CRDs from crds/ first, then the templates, in
	// its own order) into a namespace it creates, and uninstalls it.
	t.Run("helm install and uninstall", func(t *testing.T) {
		g := NewWithT(t)
		const installNS = "hub-helm-install"
		out, err := runHelmOn(t, cp.KubeconfigPath, "install", release, chartDir, "--namespace", installNS, "--create-namespace",
			"--set", "sharded=true,replicaCount=3")
		g.Expect(err).NotTo(HaveOccurred())
		// NOTES.txt says how to give the namespace config/default's Pod Security labels.
		g.Expect(out).To(ContainSubstring("kubectl label namespace " + installNS + " pod-security.kubernetes.io/enforce=restricted"))
		g.Expect(out).To(ContainSubstring("3 replicas run --sharded"))
		d := &appsv1.Deployment{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: installNS, Name: hubName}, d)).To(Succeed())
		g.Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--sharded"))
		g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: installNS, Name: hubName}, &policyv1.PodDisruptionBudget{})).To(Succeed())

		_, err = runHelmOn(t, cp.KubeconfigPath, "uninstall", release, "--namespace", installNS, "--wait")
		g.Expect(err).NotTo(HaveOccurred())
		err = c.Get(t.Context(), client.ObjectKey{Name: hubName}, &rbacv1.ClusterRole{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ClusterRole is gone: %v", err)
		g.Expect(c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNS}})).To(Succeed())
	})
}
