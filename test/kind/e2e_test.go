//go:build kind

// Package kind_test is the end-to-end test of ConfigBundle Hub on real kind clusters: the hub
// runs as the container image built from this repository (hack/image, without Docker), deployed
// with config/default into a hub cluster, and manages two member clusters registered with their
// kind-internal addresses: heals, kubectl get mc and fleet, the metrics Service refusing a scrape
// without a token (401) or without the metrics reader role (403), a FleetBundle placed by label,
// a rollout rolled back because the canary's own application (test/kind/testapp) turns unready on
// a bad value, the leader's Pod deleted and its work taken over, and no request of the hub refused by its
// cluster's API server (its audit log).
//
// It needs a reachable Docker daemon that runs privileged containers, and nothing else: kind is
// used as a library, kustomize through krusty, and registration through pkg/registration. On a
// machine without a registry or a suitable Docker, `make test-kind` (as root) sets up what it
// needs and runs it (docs/how-to/kind.md); elsewhere run it with
//
//	go test -tags kind ./test/kind/ -v -timeout 30m
//
// Environment:
//
//	KIND_E2E_NODE_IMAGE     kind node image (default: the default of the kind module in go.mod)
//	KIND_E2E_CONFIG         kind cluster config file (make test-kind: hack/kind/cluster.yaml); the
//	                        hub cluster's gets an audit log of the hub's requests
//	KIND_E2E_REQUIRE=1      fail, rather than skip, when no Docker daemon answers
//	KIND_E2E_KEEP=1         keep the clusters after the test (delete them with
//	                        kind delete clusters configbundle-e2e-hub configbundle-e2e-m1 configbundle-e2e-m2)
//	KIND_E2E_ARTIFACTS=DIR  on failure, write the clusters' logs (kind export logs) under DIR
//
// When `docker info` fails (no Docker daemon reachable) and KIND_E2E_REQUIRE is not set, the test
// is skipped, and says so: it has then tested nothing.
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
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"
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
	leaseName     = "configbundle-hub"
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
	began := time.Now()

	// The hub image, built from this checkout without Docker (hack/image, as `make image`), while
	// the clusters come up.
	imageTar, appTar := filepath.Join(t.TempDir(), "hub-image.tar"), filepath.Join(t.TempDir(), "testapp-image.tar")
	imageBuilt := make(chan error, 1)
	go func() {
		imageBuilt <- errors.Join(buildImage(root, imageTar, "--image", image),
			buildImage(root, appTar, "--image", appImage, "--package", appPackage, "--entrypoint", "/"+appName))
	}()

	// The clusters, created at once. Their kubeconfig goes to a file of the test's own: the
	// user's is left alone.
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	provider := cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(testLogger{t}))
	existing, err := provider.List()
	g.Expect(err).NotTo(HaveOccurred(), "listing kind clusters")
	names := append([]string{hubName}, memberNames...)
	for _, name := range names {
		for _, e := range existing {
			if e == name {
				t.Logf("deleting the leftover kind cluster %s of an earlier run", name)
				g.Expect(provider.Delete(name, kubeconfigPath)).To(Succeed())
			}
		}
		t.Cleanup(func() { deleteCluster(t, provider, name, kubeconfigPath) })
	}
	createOpts := []cluster.CreateOption{
		cluster.CreateWithKubeconfigPath(kubeconfigPath),
		cluster.CreateWithWaitForReady(createTimeout),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	}
	if img := os.Getenv("KIND_E2E_NODE_IMAGE"); img != "" {
		createOpts = append(createOpts, cluster.CreateWithNodeImage(img))
	}
	// The members get KIND_E2E_CONFIG as it is; the hub, with its API server's audit log on.
	memberOpts := createOpts
	hubOpts := append(slices.Clip(createOpts), cluster.CreateWithV1Alpha4Config(hubClusterConfig(t)))
	if cfg := os.Getenv("KIND_E2E_CONFIG"); cfg != "" {
		memberOpts = append(memberOpts, cluster.CreateWithConfigFile(cfg))
	}
	step := time.Now()
	created := make(chan error, len(names))
	for _, name := range names {
		t.Logf("creating kind cluster %s", name)
		opts := memberOpts
		if name == hubName {
			opts = hubOpts
		}
		go func() {
			if err := provider.Create(name, opts...); err != nil {
				created <- fmt.Errorf("creating kind cluster %s: %w", name, err)
				return
			}
			created <- nil
		}()
	}
	for range names {
		if err := <-created; err != nil {
			// kind's error holds the output of the command that failed (kubeadm init's, say).
			var run *kindexec.RunError
			if errors.As(err, &run) {
				t.Logf("output of %s:\n%s", strings.Join(run.Command, " "), run.Output)
			}
			t.Fatal(err)
		}
	}
	t.Logf("%d kind clusters created in %s", len(names), time.Since(step).Round(time.Second))

	g.Expect(<-imageBuilt).To(Succeed(), "building the hub's and the test application's images")
	loadImage(t, provider, hubName, imageTar)
	for _, name := range memberNames {
		loadImage(t, provider, name, appTar)
	}

	// config/default with the image replaced, server-side applied to the hub cluster.
	hubCfg := restConfig(t, provider, hubName, false)
	scheme, err := hubmanager.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	g.Expect(coordinationv1.AddToScheme(scheme)).To(Succeed())
	hubc, err := client.New(hubCfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	applyAll(t, hubc, decode(t, kustomize(t, overlay(t, filepath.Join(root, "config", "default")))), "")
	t.Cleanup(func() {
		if t.Failed() {
			dumpHubLogs(t, hubCfg)
		}
	})
	step = time.Now()
	waitForRollout(t, hubc)
	t.Logf("the hub Deployment rolled out in %s", time.Since(step).Round(time.Second))
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

	// What a person sees: kubectl get mc and kubectl get fleet on the hub (the kubectl of the
	// hub's node).
	hubNode := controlPlane(t, provider, hubName)
	g.Eventually(func(g Gomega) {
		mcs := nodeKubectl(g, hubNode, "get", "mc")
		for _, name := range memberNames {
			g.Expect(mcs).To(MatchRegexp(`(?m)^%s\s+True\s+Connected\s`, name))
		}
		// NAME READY REASON CLUSTERS CLUSTERS-READY BUNDLES BUNDLES-READY FAILED HEALS AGE
		g.Expect(nodeKubectl(g, hubNode, "get", "fleet")).To(MatchRegexp(`(?m)^default\s+True\s+AllReady\s+%d\s+%d\s+%d\s+%d\s+0\s+[1-9]`,
			members, members, n*members, n*members))
	}).WithTimeout(healTimeout).WithPolling(interval).Should(Succeed(), "kubectl get mc, kubectl get fleet")
	t.Logf("kubectl get mc:\n%s", nodeKubectl(g, hubNode, "get", "mc"))
	t.Logf("kubectl get fleet:\n%s", nodeKubectl(g, hubNode, "get", "fleet"))
	hubcs, err := kubernetes.NewForConfig(hubCfg)
	g.Expect(err).NotTo(HaveOccurred())
	checkMetricsAccess(t, hubcs, hubNode)

	// A FleetBundle placed by label: config/samples' web goes to the members labelled env=prod,
	// among those of the ClusterSet global bound to its namespace (config/samples too).
	applyAll(t, hubc, decode(t, readFile(t, filepath.Join(root, "config", "samples", "clusterset_global.yaml"))), "")
	prod, other := memberNames[1], memberNames[0]
	mc := memberCluster(hubc, prod)(g)
	patch := client.MergeFrom(mc.DeepCopy())
	if mc.Labels == nil {
		mc.Labels = map[string]string{}
	}
	mc.Labels["env"] = "prod"
	g.Expect(hubc.Patch(ctx, mc, patch)).To(Succeed(), "labelling MemberCluster %s env=prod", prod)
	web := decode(t, readFile(t, filepath.Join(root, "config", "samples", "fleetbundle_web.yaml")))
	g.Expect(web).To(HaveLen(1))
	applyAll(t, hubc, web, "")
	webMessage, _, _ := unstructured.NestedString(web[0].Object, "spec", "template", "spec", "message")
	webKey := client.ObjectKey{Namespace: web[0].GetNamespace(), Name: web[0].GetName()}
	g.Eventually(func(g Gomega) string {
		cm := &corev1.ConfigMap{}
		g.Expect(memberc[prod].Get(ctx, webKey, cm)).To(Succeed())
		return cm.Data[configbundlev1alpha1.MessageKey]
	}).WithTimeout(settleTimeout).WithPolling(interval).Should(Equal(webMessage), "the FleetBundle's ConfigMap in %s (env=prod)", prod)
	g.Consistently(func(g Gomega) error {
		return memberc[other].Get(ctx, webKey, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": configbundlev1alpha1.GroupVersion.String(), "kind": "ConfigBundle"}})
	}).WithTimeout(5*time.Second).WithPolling(interval).Should(WithTransform(apierrors.IsNotFound, BeTrue()),
		"no ConfigBundle %s in %s (not env=prod)", webKey, other)
	t.Logf("FleetBundle %s placed in %s only", webKey, prod)

	// A rollout judged by the application that reads the bundle, on real Pods.
	step = time.Now()
	checkRolloutJudgedByItsApplication(t, hubc, memberc, webKey.Namespace)
	t.Logf("a rollout judged by its application, rolled back on a bad value, in %s", time.Since(step).Round(time.Second))

	// The leader's Pod deleted: the other replica takes the Lease and heals a new drift.
	leader := leaderPod(g, hubc)
	g.Expect(leader).NotTo(BeEmpty(), "the Lease %s/%s has a holder", hubNamespace, leaseName)
	step = time.Now()
	g.Expect(hubc.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: hubNamespace, Name: leader}})).To(Succeed())
	g.Eventually(func(g Gomega) string { return leaderPod(g, hubc) }).WithTimeout(settleTimeout).WithPolling(time.Second).
		Should(And(Not(BeEmpty()), Not(Equal(leader))), "another pod takes the Lease")
	t.Logf("leader pod %s deleted; %s leads after %s", leader, leaderPod(g, hubc), time.Since(step).Round(time.Millisecond))
	cm = &corev1.ConfigMap{}
	g.Expect(memberc[m].Get(ctx, key, cm)).To(Succeed())
	cm.Data[configbundlev1alpha1.MessageKey] = "tampered again, after the leader went"
	g.Expect(memberc[m].Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		cm := &corev1.ConfigMap{}
		g.Expect(memberc[m].Get(ctx, key, cm)).To(Succeed())
		return cm.Data[configbundlev1alpha1.MessageKey]
	}).WithTimeout(healTimeout).WithPolling(time.Second).Should(Equal(want), "the new leader heals")
	waitForRollout(t, hubc)
	checkNoRefusal(t, hubNode)
	t.Logf("kind e2e test done in %s (clusters included)", time.Since(began).Round(time.Second))
}

// leaderPod is the name of the pod holding the hub's leader-election Lease, empty if none does.
func leaderPod(g Gomega, c client.Client) string {
	lease := &coordinationv1.Lease{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: hubNamespace, Name: leaseName}, lease)).To(Succeed())
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	pod, _, _ := strings.Cut(holder, "_")
	return pod
}

// controlPlane is the control-plane node of a kind cluster.
func controlPlane(t *testing.T, provider *cluster.Provider, name string) nodes.Node {
	t.Helper()
	all, err := provider.ListInternalNodes(name)
	if err != nil {
		t.Fatalf("listing the nodes of %s: %v", name, err)
	}
	cps, err := nodeutils.ControlPlaneNodes(all)
	if err != nil || len(cps) == 0 {
		t.Fatalf("the control plane of %s: %v", name, err)
	}
	return cps[0]
}

// nodeKubectl runs kubectl in a node, as its admin, and returns what it printed.
func nodeKubectl(g Gomega, n nodes.Node, args ...string) string {
	var out bytes.Buffer
	cmd := n.Command("kubectl", append([]string{"--kubeconfig=/etc/kubernetes/admin.conf"}, args...)...).SetStdout(&out).SetStderr(&out)
	g.Expect(cmd.Run()).To(Succeed(), "kubectl %s: %s", strings.Join(args, " "), out.String())
	return out.String()
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requireDocker skips the test when no Docker daemon answers, the one condition under which it
// cannot run at all, unless KIND_E2E_REQUIRE is set (as make test-kind sets it): then it fails.
func requireDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("the kind e2e test needs a reachable Docker daemon, and `docker info` failed (%v): %s",
			err, strings.TrimSpace(lastLine(out)))
		if os.Getenv("KIND_E2E_REQUIRE") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, NOTHING TESTED: " + msg)
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

// buildImage builds an image from root without Docker, as `make image` does (hack/image), into
// the docker-archive tar: the hub's, or with args naming another package, the test application's.
func buildImage(root, tar string, args ...string) error {
	cmd := exec.Command("go", append([]string{"run", "./hack/image", "--output", tar}, args...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go run ./hack/image: %w\n%s", err, out)
	}
	return nil
}

// loadImage loads the image archive into every node of the cluster, as `kind load
// image-archive` does: the nodes' containerd imports it.
func loadImage(t *testing.T, provider *cluster.Provider, name, archive string) {
	t.Helper()
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
			t.Fatalf("loading %s into node %s: %v", archive, n.String(), err)
		}
	}
	t.Logf("loaded %s into %s (%d nodes)", filepath.Base(archive), name, len(nodes))
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
		// A copy: Apply fills the object in with the server's answer (managedFields included),
		// which a second apply of it, into another cluster, would be refused for.
		g.Expect(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership)).
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
