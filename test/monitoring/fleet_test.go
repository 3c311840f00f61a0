package monitoring

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/pkg/hubmanager"
)

const (
	startTimeout = 3 * time.Minute
	joinTimeout  = time.Minute
	timeout      = 30 * time.Second
	interval     = 100 * time.Millisecond
	// fightHeals is how many heals within a minute make a fight (configbundle.FightHeals).
	fightHeals = 10
)

// fleet is a hub binary managing two members on real control planes, in the state the test
// scrapes: a FleetBundle placed in both members; m1 healthy, with drift healed and one fight; m2
// with a ConfigBundle whose ConfigMap a ResourceQuota keeps refusing (CreateFailed, retried:
// reconcile errors and a failed bundle).
type fleet struct {
	hub     *hubprocess.Process
	hubc    client.Client
	members map[string]client.Client
	planes  map[string]*controlplane.ControlPlane
}

// startFleet starts the fleet; everything stops when the test ends.
func startFleet(t *testing.T) *fleet {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the control-plane binaries")
	}
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// Built in the hub's own module (-C), with its go.mod's versions, not this module's.
	bin, err := hubprocess.Build(dir, "-C", root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	hubCRDs, err := config.HubCRDs()
	if err != nil {
		t.Fatal(err)
	}
	cps, err := controlplane.Start(ctx, append(controlplane.Named(controlplane.Options{CRDs: hubCRDs}, "hub"),
		controlplane.Named(controlplane.Options{}, "m1", "m2")...)...)
	if err != nil {
		t.Fatalf("starting control planes: %v", err)
	}
	t.Cleanup(func() { _ = controlplane.StopAll(cps) })
	scheme, err := hubmanager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	hubCP := cps[0]
	hubc, err := client.New(hubCP.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := hubc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.DefaultSecretNamespace}}); err != nil {
		t.Fatal(err)
	}

	f := &fleet{hubc: hubc, members: map[string]client.Client{}, planes: map[string]*controlplane.ControlPlane{}}
	args := []string{"--probe-interval=1s", "--heartbeat-interval=1s"}
	if help, _ := exec.Command(bin, "--help").CombinedOutput(); strings.Contains(string(help), "--metrics-secure") {
		args = append(args, "--metrics-secure=false")
	} else {
		t.Log("the hub has no --metrics-secure yet: scraping its plain HTTP endpoint")
	}
	f.hub, err = hubprocess.Start(ctx, hubprocess.Options{Binary: bin, Kubeconfig: hubCP.KubeconfigPath,
		LogPath: filepath.Join(dir, "hub.log"), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hub log (tail):\n%s", f.hub.LogTail(8000))
		}
		f.hub.Stop(syscall.SIGTERM)
	})

	for _, cp := range cps[1:] {
		out, err := exec.Command(bin, "register", cp.Name, "--member-kubeconfig", cp.KubeconfigPath,
			"--hub-kubeconfig", hubCP.KubeconfigPath, "--timeout", timeout.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("hub register %s: %v\n%s", cp.Name, err, out)
		}
		f.planes[cp.Name] = cp
		if f.members[cp.Name], err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cp := range cps[1:] {
		poll(t, joinTimeout, "member "+cp.Name+" Ready", func(ctx context.Context) (bool, error) {
			mc := &hubv1alpha1.MemberCluster{}
			if err := hubc.Get(ctx, client.ObjectKey{Name: cp.Name}, mc); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return meta.IsStatusConditionTrue(mc.Status.Conditions, hubv1alpha1.ReadyCondition), nil
		})
	}
	return f
}

// makeHistory brings the fleet into the state its doc comment describes.
func (f *fleet) makeHistory(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	m1, m2 := f.members["m1"], f.members["m2"]
	for _, c := range []client.Client{f.hubc, m1, m2} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}); err != nil {
			t.Fatal(err)
		}
	}
	f.blockConfigMaps(t, m2, "quota")
	if err := m2.Create(ctx, bundle("quota", "blocked", "refused")); err != nil {
		t.Fatal(err)
	}

	// Both: a FleetBundle placed into them (placement latency).
	for _, m := range []string{"m1", "m2"} {
		mc := &hubv1alpha1.MemberCluster{}
		if err := f.hubc.Get(ctx, client.ObjectKey{Name: m}, mc); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(mc.DeepCopy())
		mc.Labels = map[string]string{"monitoring": "yes"}
		if err := f.hubc.Patch(ctx, mc, patch); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.hubc.Create(ctx, &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "placed"},
		Spec: hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "yes"}},
			Template: hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "placed"}}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []client.Client{m1, m2} {
		poll(t, timeout, "the placed ConfigMap", configMapSays(c, bundle("monitoring", "placed", ""), "placed"))
	}

	// m1: a bundle, and drift healed often enough to be a fight.
	b := bundle("monitoring", "web", "hello")
	if err := m1.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	poll(t, timeout, "the ConfigMap of m1's bundle", configMapSays(m1, b, "hello"))
	for i := range fightHeals {
		tamper(t, m1, b, fmt.Sprintf("tampered %d", i))
		poll(t, timeout, "the heal of m1's ConfigMap", configMapSays(m1, b, "hello"))
	}
}

// blockConfigMaps makes a namespace of a member refuse every new ConfigMap: a ResourceQuota of
// none, with the status the quota controller (which these control planes lack) would write.
func (f *fleet) blockConfigMaps(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	none := corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: none}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: none, Used: none}
	if err := c.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
}

// configMapSays is true once a bundle's ConfigMap has the message.
func configMapSays(c client.Client, b *configbundlev1alpha1.ConfigBundle, message string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cm.Data["message"] == message, nil
	}
}

func bundle(ns, name, message string) *configbundlev1alpha1.ConfigBundle {
	return &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: configbundlev1alpha1.ConfigBundleSpec{Message: message}}
}

// tamper changes a managed ConfigMap's message, as another writer would.
func tamper(t *testing.T, c client.Client, b *configbundlev1alpha1.ConfigBundle, message string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), cm); err != nil {
			return false, err
		}
		cm.Data["message"] = message
		if err := c.Update(ctx, cm); apierrors.IsConflict(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("changing the ConfigMap %s: %v", b.Name, err)
	}
}

// scrape reads the hub's metrics.
func (f *fleet) scrape() (string, error) {
	resp, err := http.Get("http://" + f.hub.MetricsAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	return string(body), nil
}

// historyShown is what makeHistory did, as the hub's metrics show it.
var historyShown = []string{
	`configbundle_heals_total{cluster="m1"} 10`,
	`configbundle_fights_total{cluster="m1"} 1`,
	`configbundle_reconcile_errors_total{cluster="m2",reason="CreateFailed"}`,
	`configbundle_member_failed_bundles{cluster="m2"} 1`,
	`configbundle_member_last_probe_success_timestamp_seconds{cluster="m2"}`,
	`configbundle_member_probe_duration_seconds_count{cluster="m2"}`,
	`configbundle_placement_latency_seconds_count{cluster="m1"}`,
	`configbundle_placement_latency_seconds_count{cluster="m2"}`,
}

// scrapeShowing scrapes the hub once its metrics show every line of want. Series the hub does
// not export (yet) are not waited for beyond the timeout: the test reports them, and the
// expressions' check then names the metrics missing.
func (f *fleet) scrapeShowing(t *testing.T, want []string) string {
	t.Helper()
	var text string
	var missing []string
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		if text, err = f.scrape(); err != nil {
			return false, nil
		}
		missing = missing[:0]
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0, nil
	})
	if text == "" {
		t.Fatal("could not scrape the hub")
	}
	if len(missing) > 0 {
		t.Errorf("after %v the scrape still lacks:\n  %s", timeout, strings.Join(missing, "\n  "))
	}
	return text
}

// pause freezes a member's API server until the test ends.
func (f *fleet) pause(t *testing.T, member string) {
	t.Helper()
	cp := f.planes[member]
	if err := cp.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Resume() })
}

func poll(t *testing.T, d time.Duration, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), interval, d, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
