package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// Register registers (or registers again) a member with the hub binary's register command, as
// a user would, with further flags args, and returns the command's output.
func (f *Fleet) Register(ctx context.Context, name string, args ...string) ([]byte, error) {
	m := f.Member(name)
	if m == nil {
		return nil, fmt.Errorf("no member %s", name)
	}
	all := []string{"register", name, "--member-kubeconfig", m.Plane.KubeconfigPath, "--hub-kubeconfig", f.HubKubeconfig}
	if f.opts.SecretNamespace != hubv1alpha1.DefaultSecretNamespace {
		all = append(all, "--secret-namespace", f.opts.SecretNamespace)
	}
	out, err := exec.CommandContext(ctx, f.Binary, append(all, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("hub register %s: %w\n%s", name, err, out)
	}
	return out, nil
}

// PutSecret creates or replaces the labelled member Secret name on the hub with data.
func (f *Fleet) PutSecret(ctx context.Context, name string, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.opts.SecretNamespace,
		Labels: map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}}, Data: data}
	// Create first: a new Secret (what the benchmark times) costs one request.
	if err := f.Hub.Create(ctx, s); !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := f.Hub.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		return err
	}
	s.Labels = map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}
	s.Data = data
	return f.Hub.Update(ctx, s)
}

// PutKubeconfig puts the member Secret name holding kubeconfig under the default key.
func (f *Fleet) PutKubeconfig(ctx context.Context, name string, kubeconfig []byte) error {
	return f.PutSecret(ctx, name, map[string][]byte{hubv1alpha1.DefaultSecretKey: kubeconfig})
}

// DeleteSecret deletes the member Secret name; one that is gone is no error.
func (f *Fleet) DeleteSecret(ctx context.Context, name string) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.opts.SecretNamespace}}
	return client.IgnoreNotFound(f.Hub.Delete(ctx, s))
}

// KubeconfigFor renders a self-contained kubeconfig for a client config. It panics if the
// config cannot be rendered, which only a config the fixture's caller made wrong causes.
func KubeconfigFor(cfg *rest.Config) []byte {
	data, err := controlplane.KubeconfigFor("c", cfg)
	if err != nil {
		panic(err)
	}
	return data
}

// BlackHoleKubeconfig is a kubeconfig whose server is addr (a netproxy.BlackHole's), over TLS
// not verified, with a token.
func BlackHoleKubeconfig(addr string) []byte {
	return KubeconfigFor(&rest.Config{Host: "https://" + addr, BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
}

// NewBundle returns a ConfigBundle ns/name with message.
func NewBundle(ns, name, message string) *configbundlev1alpha1.ConfigBundle {
	return &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: configbundlev1alpha1.ConfigBundleSpec{Message: message}}
}

// NewFleetBundle returns a FleetBundle ns/name that places spec in the members whose labels
// match selector.
func NewFleetBundle(ns, name string, selector map[string]string, spec configbundlev1alpha1.ConfigBundleSpec) *hubv1alpha1.FleetBundle {
	return &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hubv1alpha1.FleetBundleSpec{ClusterSelector: &metav1.LabelSelector{MatchLabels: selector},
			Template: hubv1alpha1.ConfigBundleTemplate{Spec: spec}}}
}

// tamperRetry is how Tamper retries on conflicts (with the hub's heals): for about 2.5s.
var tamperRetry = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1}

// EnsureNamespace creates the namespace name with c; one that exists is no error.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	return client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// Message reads the message of the ConfigMap key with c.
func Message(ctx context.Context, c client.Client, key client.ObjectKey) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		return "", err
	}
	return cm.Data[configbundlev1alpha1.MessageKey], nil
}

// Tamper sets the message of the ConfigMap key in a member, as another writer would, retrying
// on conflicts.
func Tamper(ctx context.Context, c client.Client, key client.ObjectKey, message string) error {
	return retry.RetryOnConflict(tamperRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[configbundlev1alpha1.MessageKey] = message
		return c.Update(ctx, cm)
	})
}

// GetMemberCluster reads the MemberCluster name.
func (f *Fleet) GetMemberCluster(ctx context.Context, name string) (*hubv1alpha1.MemberCluster, error) {
	mc := &hubv1alpha1.MemberCluster{}
	return mc, f.Hub.Get(ctx, client.ObjectKey{Name: name}, mc)
}

// GetFleet reads the Fleet.
func (f *Fleet) GetFleet(ctx context.Context) (*hubv1alpha1.Fleet, error) {
	fl := &hubv1alpha1.Fleet{}
	return fl, f.Hub.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, fl)
}

// ReadyReason returns the status and reason of the Ready condition among conds, empty if there
// is none.
func ReadyReason(conds []metav1.Condition) (metav1.ConditionStatus, string) {
	c := meta.FindStatusCondition(conds, hubv1alpha1.ReadyCondition)
	if c == nil {
		return "", ""
	}
	return c.Status, c.Reason
}

// WaitReady waits until the MemberCluster name is Ready with reason; with reason "", until it
// is Ready (True) for any reason.
func (f *Fleet) WaitReady(ctx context.Context, name, reason string) error {
	m := f.Member(name)
	if m == nil {
		return fmt.Errorf("no member %s", name)
	}
	err := f.poll(ctx, func(ctx context.Context) (bool, error) { return f.AllReady(ctx, reason, m), nil })
	if err != nil {
		return fmt.Errorf("waiting for member %s to be Ready (%s): %w", name, reason, err)
	}
	return nil
}

// AllReady reports whether the Ready condition of every member's MemberCluster has reason
// (with reason "": is True), as one list of the MemberClusters says.
func (f *Fleet) AllReady(ctx context.Context, reason string, members ...*Member) bool {
	list := &hubv1alpha1.MemberClusterList{}
	if err := f.Hub.List(ctx, list); err != nil {
		return false
	}
	ready := map[string]bool{}
	for _, mc := range list.Items {
		status, got := ReadyReason(mc.Status.Conditions)
		ready[mc.Name] = got == reason || reason == "" && status == metav1.ConditionTrue
	}
	for _, m := range members {
		if !ready[m.Name] {
			return false
		}
	}
	return true
}

// LabelMember sets labels on the MemberCluster name, as kubectl label --overwrite does; one
// whose value is empty is removed, as kubectl label key- does. It is one merge patch.
func (f *Fleet) LabelMember(ctx context.Context, name string, labels map[string]string) error {
	patch := map[string]any{}
	for k, v := range labels {
		patch[k] = v
		if v == "" {
			patch[k] = nil
		}
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if err != nil {
		return err
	}
	mc := &hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := f.Hub.Patch(ctx, mc, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("labelling MemberCluster %s: %w", name, err)
	}
	return nil
}

// ScrapeHub reads the Prometheus metrics of the hub process name.
func (f *Fleet) ScrapeHub(name string) (string, error) {
	p := f.HubProcess(name)
	if p == nil {
		return "", fmt.Errorf("hub %s is not running", name)
	}
	return Scrape(p.MetricsAddr)
}

// Scrape reads the Prometheus metrics served on addr, plain HTTP.
func Scrape(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
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

// Sample returns the value of one series of a scrape (name and labels as the exposition format
// writes them), or -1 if the scrape has none.
func Sample(scrape, series string) float64 {
	for line := range strings.Lines(scrape) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}
