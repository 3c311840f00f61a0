//go:build kind

// Package kind_test is the end-to-end test of ConfigBundle Hub on real kind clusters: the hub
// runs as the container image built from this repository, deployed with config/default into a
// hub cluster, and manages two member clusters registered with their kind-internal addresses.
//
// It needs a reachable Docker daemon with BuildKit (docker buildx) and nothing else: kind is used
// as a library, kustomize through krusty, and registration through pkg/registration. Run it with
//
//	go test -tags kind ./test/kind/ -v -timeout 30m
//
// Environment:
//
//	KIND_E2E_KEEP=1         keep the clusters after the test (delete them with
//	                        kind delete clusters configbundle-e2e-hub configbundle-e2e-m1 configbundle-e2e-m2)
//	KIND_E2E_NODE_IMAGE     kind node image (default: the default of the kind module in go.mod)
//	KIND_E2E_ARTIFACTS=DIR  on failure, write the clusters' logs (kind export logs) under DIR
//
// When `docker info` fails (no Docker daemon reachable) the test is skipped, and says so: it has
// then tested nothing.
package kind_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindlog "sigs.k8s.io/kind/pkg/log"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/registration"
)

// The clusters of the test; their names differ from hack/kind/up.sh's defaults, so the test leaves
// a `make kind-up` fleet alone.
const (
	hubName = "configbundle-e2e-hub"
	// baseImage is the image name config/default's Deployment uses, which the overlay replaces.
	baseImage = "ghcr.io/configbundle/hub"
	// image is what the test builds and loads: not :latest, so that the kubelet never pulls it.
	imageName = baseImage
	imageTag  = "kind-e2e"
	image     = imageName + ":" + imageTag

	hubNamespace  = "configbundle-system"
	hubDeployment = "configbundle-hub"
	fieldOwner    = "configbundle-kind-e2e"
	bundleCRD     = "configbundles.configbundle.dev"
)

var memberNames = []string{"configbundle-e2e-m1", "configbundle-e2e-m2"}

// Timeouts, generous for a loaded two-core machine pulling node images.
const (
	createTimeout  = 5 * time.Minute // one kind cluster, until its node is Ready
	rolloutTimeout = 5 * time.Minute // the hub Deployment
	joinTimeout    = 3 * time.Minute // a registered member turning Ready
	settleTimeout  = 3 * time.Minute // bundles reconciled and counted, the Fleet Ready
	healTimeout    = time.Minute     // a tampered ConfigMap restored
	interval       = 2 * time.Second
)

func TestKindFleet(t *testing.T) {
	requireDocker(t)
	g := NewWithT(t)
	ctx := t.Context()
	root := repoRoot(t)

	// The clusters. Their kubeconfig goes to a file of the test's own: the user's is left alone.
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	provider := cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(testLogger{t}))
	existing, err := provider.List()
	g.Expect(err).NotTo(HaveOccurred(), "listing kind clusters")
	for _, name := range append([]string{hubName}, memberNames...) {
		for _, e := range existing {
			if e == name {
				t.Logf("deleting the leftover kind cluster %s of an earlier run", name)
				g.Expect(provider.Delete(name, kubeconfigPath)).To(Succeed())
			}
		}
		t.Cleanup(func() { deleteCluster(t, provider, name, kubeconfigPath) })
		createOpts := []cluster.CreateOption{
			cluster.CreateWithKubeconfigPath(kubeconfigPath),
			cluster.CreateWithWaitForReady(createTimeout),
			cluster.CreateWithDisplayUsage(false),
			cluster.CreateWithDisplaySalutation(false),
		}
		if img := os.Getenv("KIND_E2E_NODE_IMAGE"); img != "" {
			createOpts = append(createOpts, cluster.CreateWithNodeImage(img))
		}
		t.Logf("creating kind cluster %s", name)
		g.Expect(provider.Create(name, createOpts...)).To(Succeed(), "creating kind cluster %s", name)
	}

	// The hub image, built from this checkout and loaded into the hub cluster's nodes as
	// `kind load docker-image` does.
	buildImage(t, root)
	loadImage(t, provider, hubName)

	// config/default with the image replaced, server-side applied to the hub cluster.
	hubCfg := restConfig(t, provider, hubName, false)
	scheme, err := hubmanager.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	hubc, err := client.New(hubCfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	applyAll(t, hubc, decode(t, kustomize(t, overlay(t, filepath.Join(root, "config", "default")))), "")
	t.Cleanup(func() {
		if t.Failed() {
			dumpHubLogs(t, hubCfg)
		}
	})
	waitForRollout(t, hubc)

	// Register every member by its kind-internal address, which the hub's Pod reaches over the
	// kind Docker network; Register itself verifies the credential through the host's address.
	memberc := map[string]client.Client{}
	for _, name := range memberNames {
		internal := serverOf(t, provider, name)
		regCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		res, err := registration.Register(regCtx, registration.Options{
			Name:   name,
			Member: restConfig(t, provider, name, false),
			Hub:    hubCfg,
			Server: internal,
		})
		cancel()
		g.Expect(err).NotTo(HaveOccurred(), "registering %s", name)
		g.Expect(res.Server).To(Equal(internal))
		t.Logf("registered %s: Secret %s/%s, server %s", name, res.SecretNamespace, res.SecretName, res.Server)
		memberc[name], err = client.New(restConfig(t, provider, name, false), client.Options{Scheme: scheme})
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, name := range memberNames {
		g.Eventually(memberCluster(hubc, name)).WithTimeout(joinTimeout).WithPolling(interval).
			Should(readyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), "MemberCluster %s", name)
	}

	// config/samples in every member (the hub installed the ConfigBundle CRD when it joined).
	samples := decode(t, kustomize(t, filepath.Join(root, "config", "samples")))
	var bundles []*unstructured.Unstructured
	for _, obj := range samples {
		if obj.GroupVersionKind().Group == configbundlev1alpha1.GroupVersion.Group && obj.GetKind() == "ConfigBundle" {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(metav1.NamespaceDefault)
			}
			bundles = append(bundles, obj)
		}
	}
	g.Expect(bundles).NotTo(BeEmpty(), "config/samples holds no ConfigBundle")
	for _, name := range memberNames {
		g.Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(memberc[name].Get(ctx, client.ObjectKey{Name: bundleCRD}, crd)).To(Succeed())
			g.Expect(established(crd)).To(BeTrue())
		}).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed(), "the ConfigBundle CRD in %s", name)
		applyAll(t, memberc[name], samples, metav1.NamespaceDefault)
	}

	// The hub's summary: each member Ready with every sample counted Ready, the Fleet Ready.
	n, members := int64(len(bundles)), int64(len(memberNames))
	for _, name := range memberNames {
		g.Eventually(func(g Gomega) hubv1alpha1.BundleCounts { return memberCluster(hubc, name)(g).Status.Bundles }).
			WithTimeout(settleTimeout).WithPolling(interval).
			Should(Equal(hubv1alpha1.BundleCounts{Total: n, Ready: n}), "bundles of MemberCluster %s", name)
	}
	g.Eventually(fleet(hubc)).WithTimeout(settleTimeout).WithPolling(interval).Should(And(
		readyIs(metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		WithTransform(func(f *hubv1alpha1.Fleet) hubv1alpha1.ClusterCounts { return f.Status.Clusters },
			Equal(hubv1alpha1.ClusterCounts{Total: members, Ready: members})),
		WithTransform(func(f *hubv1alpha1.Fleet) hubv1alpha1.BundleCounts { return f.Status.Bundles },
			Equal(hubv1alpha1.BundleCounts{Total: n * members, Ready: n * members})),
	))

	// Tamper with a managed ConfigMap in the first member: the hub heals it and counts the heal.
	// An immutable bundle's ConfigMap is immutable too, so the victim is a mutable one.
	var victim *unstructured.Unstructured
	for _, b := range bundles {
		if immutable, _, _ := unstructured.NestedBool(b.Object, "spec", "immutable"); !immutable {
			victim = b
			break
		}
	}
	g.Expect(victim).NotTo(BeNil(), "config/samples holds no mutable ConfigBundle to tamper with")
	m := memberNames[0]
	want, _, err := unstructured.NestedString(victim.Object, "spec", "message")
	g.Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKey{Namespace: victim.GetNamespace(), Name: victim.GetName()}
	cm := &corev1.ConfigMap{}
	g.Expect(memberc[m].Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, want))
	cm.Data[configbundlev1alpha1.MessageKey] = "tampered by the kind e2e test"
	g.Expect(memberc[m].Update(ctx, cm)).To(Succeed())
	t.Logf("tampered with ConfigMap %s in %s", key, m)
	g.Eventually(func(g Gomega) string {
		cm := &corev1.ConfigMap{}
		g.Expect(memberc[m].Get(ctx, key, cm)).To(Succeed())
		return cm.Data[configbundlev1alpha1.MessageKey]
	}).WithTimeout(healTimeout).WithPolling(time.Second).Should(Equal(want), "the tampered ConfigMap is healed")
	g.Eventually(func(g Gomega) int64 { return memberCluster(hubc, m)(g).Status.Heals }).
		WithTimeout(healTimeout).WithPolling(interval).Should(BeNumerically(">=", 1), "the heal is counted")
	g.Eventually(fleet(hubc)).WithTimeout(healTimeout).WithPolling(interval).Should(And(
		readyIs(metav1.ConditionTrue, hubv1alpha1.AllReadyReason),
		WithTransform(func(f *hubv1alpha1.Fleet) int64 { return f.Status.Heals }, BeNumerically(">=", 1)),
	))
}

// requireDocker skips the test when no Docker daemon answers, the one condition under which it
// cannot run at all.
func requireDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOTHING TESTED: the kind e2e test needs a reachable Docker daemon, and `docker info` failed (%v): %s",
			err, strings.TrimSpace(lastLine(out)))
	}
	if out, err := exec.Command("docker", "buildx", "version").CombinedOutput(); err != nil {
		t.Fatalf("the Docker daemon is reachable but BuildKit is not: `docker buildx version` failed (%v): %s\n"+
			"install the docker buildx plugin (the Dockerfile uses cache mounts)", err, out)
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// repoRoot is the module root: the test runs in test/kind.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: run the test from its package directory (go test ./test/kind/)", root)
	}
	return root
}

func deleteCluster(t *testing.T, provider *cluster.Provider, name, kubeconfigPath string) {
	if dir := os.Getenv("KIND_E2E_ARTIFACTS"); dir != "" && t.Failed() {
		if err := provider.CollectLogs(name, filepath.Join(dir, name)); err != nil {
			t.Logf("collecting the logs of %s: %v", name, err)
		}
	}
	if os.Getenv("KIND_E2E_KEEP") != "" {
		t.Logf("KIND_E2E_KEEP is set: keeping kind cluster %s (kubeconfig: kind get kubeconfig --name %s)", name, name)
		return
	}
	if err := provider.Delete(name, kubeconfigPath); err != nil {
		t.Errorf("deleting kind cluster %s: %v", name, err)
	}
}

// buildImage builds the hub image from root. Provenance attestations are off: `docker save` of
// an image with attestations cannot be imported by the nodes' containerd (kind issue #3795).
func buildImage(t *testing.T, root string) {
	t.Helper()
	t.Logf("building %s", image)
	cmd := exec.Command("docker", "build", "--provenance=false", "-t", image, root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
}

// loadImage loads the image into every node of the cluster, as `kind load docker-image` does:
// docker save, then the nodes' containerd imports the archive.
func loadImage(t *testing.T, provider *cluster.Provider, name string) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	if out, err := exec.Command("docker", "save", "-o", archive, image).CombinedOutput(); err != nil {
		t.Fatalf("docker save: %v\n%s", err, out)
	}
	nodes, err := provider.ListInternalNodes(name)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("listing the nodes of %s: %v (%d nodes)", name, err, len(nodes))
	}
	for _, n := range nodes {
		f, err := os.Open(archive)
		if err != nil {
			t.Fatal(err)
		}
		err = nodeutils.LoadImageArchive(n, f)
		f.Close()
		if err != nil {
			t.Fatalf("loading %s into node %s: %v", image, n.String(), err)
		}
	}
	t.Logf("loaded %s into %s (%d nodes)", image, name, len(nodes))
}

// restConfig is the client config of a cluster: its host address, or with internal its address
// on the kind Docker network.
func restConfig(t *testing.T, provider *cluster.Provider, name string, internal bool) *rest.Config {
	t.Helper()
	kc, err := provider.KubeConfig(name, internal)
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kc))
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", name, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// serverOf is the API server URL of a cluster on the kind Docker network, such as
// https://configbundle-e2e-m1-control-plane:6443.
func serverOf(t *testing.T, provider *cluster.Provider, name string) string {
	t.Helper()
	server := restConfig(t, provider, name, true).Host
	if !strings.HasPrefix(server, "https://") {
		t.Fatalf("unexpected internal server %q of %s", server, name)
	}
	return server
}

// overlay writes a kustomization that takes base and sets the hub image, and returns its
// directory. kustomize refuses absolute paths to bases, so base is given relative to it.
func overlay(t *testing.T, base string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatalf("the kustomize base: %v", err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: %s
  newName: %s
  newTag: %s
patches:
- target: {group: apps, kind: Deployment, name: %s}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
`, filepath.ToSlash(rel), baseImage, imageName, imageTag, hubDeployment)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kustomize renders a kustomization directory, as `kubectl kustomize` does.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	return out
}

// decode splits a multi-document YAML stream into objects.
func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := d.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// applyAll server-side applies objects: Namespaces and CRDs first, waiting until the CRDs are
// established, then the rest. Namespaced objects without a namespace go to defaultNamespace
// (when it is not empty); namespaces they name that the manifests lack are created.
func applyAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured, defaultNamespace string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	apply := func(obj *unstructured.Unstructured) {
		g.Expect(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership)).
			To(Succeed(), "applying %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	}
	var crds []string
	declared := map[string]bool{}
	for _, obj := range objs {
		switch obj.GroupVersionKind().GroupKind() {
		case corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind():
			declared[obj.GetName()] = true
			apply(obj)
		case apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition").GroupKind():
			crds = append(crds, obj.GetName())
			apply(obj)
		}
	}
	for _, name := range crds {
		g.Eventually(func(g Gomega) bool {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			return established(crd)
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "CRD %s established", name)
	}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Namespace", "CustomResourceDefinition":
			continue
		}
		namespaced, err := c.IsObjectNamespaced(obj)
		g.Expect(err).NotTo(HaveOccurred(), "is %s namespaced", obj.GroupVersionKind())
		if namespaced {
			if obj.GetNamespace() == "" && defaultNamespace != "" {
				obj.SetNamespace(defaultNamespace)
			}
			if ns := obj.GetNamespace(); ns != "" && !declared[ns] {
				nsObj := &unstructured.Unstructured{}
				nsObj.SetAPIVersion("v1")
				nsObj.SetKind("Namespace")
				nsObj.SetName(ns)
				apply(nsObj)
				declared[ns] = true
			}
		}
		apply(obj)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitForRollout waits until the hub Deployment is rolled out, as kubectl rollout status does.
func waitForRollout(t *testing.T, c client.Client) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: hubNamespace, Name: hubDeployment}, d)).To(Succeed())
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		g.Expect(d.Status.ObservedGeneration).To(BeNumerically(">=", d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(want))
		g.Expect(d.Status.AvailableReplicas).To(Equal(want))
		g.Expect(d.Status.Replicas).To(Equal(want), "no old replicas left")
	}).WithTimeout(rolloutTimeout).WithPolling(interval).Should(Succeed(), "rollout of deployment %s/%s", hubNamespace, hubDeployment)
}

// dumpHubLogs logs the tail of every container log of the hub's namespace.
func dumpHubLogs(t *testing.T, cfg *rest.Config) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Logf("hub logs: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(hubNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("hub logs: listing pods: %v", err)
		return
	}
	tail := int64(200)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			raw, err := cs.CoreV1().Pods(hubNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				t.Logf("logs of %s/%s: %v", p.Name, c.Name, err)
				continue
			}
			t.Logf("---- logs of pod %s container %s (phase %s, last %d lines) ----\n%s", p.Name, c.Name, p.Status.Phase, tail, raw)
		}
	}
}

func memberCluster(c client.Client, name string) func(Gomega) *hubv1alpha1.MemberCluster {
	return func(g Gomega) *hubv1alpha1.MemberCluster {
		mc := &hubv1alpha1.MemberCluster{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, mc)).To(Succeed())
		return mc
	}
}

func fleet(c client.Client) func(Gomega) *hubv1alpha1.Fleet {
	return func(g Gomega) *hubv1alpha1.Fleet {
		f := &hubv1alpha1.Fleet{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
		return f
	}
}

// readyIs matches a MemberCluster or Fleet whose Ready condition has the status and reason.
func readyIs(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(obj runtime.Object) string {
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *hubv1alpha1.MemberCluster:
			conds = o.Status.Conditions
		case *hubv1alpha1.Fleet:
			conds = o.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, hubv1alpha1.ReadyCondition)
		if c == nil {
			return "no Ready condition"
		}
		return string(c.Status) + "/" + c.Reason + " (" + c.Message + ")"
	}, HavePrefix(string(status)+"/"+reason+" ("))
}

// testLogger sends kind's messages to the test log.
type testLogger struct{ t *testing.T }

func (l testLogger) Warn(msg string)                  { l.t.Log("kind: warning: " + msg) }
func (l testLogger) Warnf(format string, args ...any) { l.Warn(fmt.Sprintf(format, args...)) }
func (l testLogger) Error(msg string)                 { l.t.Log("kind: error: " + msg) }
func (l testLogger) Errorf(format string, args ...any) {
	l.Error(fmt.Sprintf(format, args...))
}
func (l testLogger) V(level kindlog.Level) kindlog.InfoLogger {
	return testInfoLogger{t: l.t, enabled: level <= 0}
}

type testInfoLogger struct {
	t       *testing.T
	enabled bool
}

func (l testInfoLogger) Info(msg string) {
	if l.enabled {
		l.t.Log("kind: " + msg)
	}
}
func (l testInfoLogger) Infof(format string, args ...any) { l.Info(fmt.Sprintf(format, args...)) }
func (l testInfoLogger) Enabled() bool                    { return l.enabled }
