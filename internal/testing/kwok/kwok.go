package kwok

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"configbundle.dev/hub/internal/testing/controlplane"
)

// Names of the simulation.
const (
	// NodeName is the simulated Node: a Pod runs there when its spec.nodeName names it (no
	// scheduler runs).
	NodeName = "kwok-node"
	// ValueAnnotation records on a Pod the value it read from its ConfigMap when it started
	// (Resolve): the Pod is ready unless it is BadValue.
	ValueAnnotation = "test.configbundle.dev/value"
	// BadValue is the value an application refuses: its Pod waits in CrashLoopBackOff.
	BadValue = "bad"

	// nodeAnnotation marks the Nodes kwok manages.
	nodeAnnotation = "kwok.x-k8s.io/node"
	// resolveInterval is how often Resolve looks for Pods that started.
	resolveInterval = 100 * time.Millisecond
)

//go:embed stages.yaml
var stages []byte

// Start runs kwok against a control plane until ctx ends, with the simulated Node NodeName, and
// Resolve, which starts its Pods: a control plane whose kube-controller-manager runs the
// deployment and replicaset controllers (controlplane.Options.Controllers) then runs
// Deployments.
func Start(ctx context.Context, cp *controlplane.ControlPlane, c client.Client) error {
	dir, err := os.MkdirTemp("", "kwok-"+cp.Name+"-")
	if err != nil {
		return fmt.Errorf("kwok for %s: %w", cp.Name, err)
	}
	config := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(config, stages, 0o600); err != nil {
		return fmt.Errorf("kwok for %s: %w", cp.Name, err)
	}
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kwok")
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig="+cp.KubeconfigPath, "--config="+config,
		"--manage-nodes-with-annotation-selector="+nodeAnnotation+"=fake")
	cmd.Env = append(os.Environ(), "HOME="+dir) // no kwok configuration of this user's
	cmd.SysProcAttr = childSysProcAttr()
	if out := os.Getenv("TEST_VERBOSE_LOGS"); out != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kwok (%s, built by hack/offline/testbin.sh) for %s: %w", bin, cp.Name, err)
	}
	go func() {
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Annotations: map[string]string{nodeAnnotation: "fake"}},
		Spec: corev1.NodeSpec{Taints: nil}}
	if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Node %s in %s: %w", NodeName, cp.Name, err)
	}
	go Resolve(ctx, c)
	return nil
}

// Resolve starts the Pods of the simulated Node until ctx ends: each Pod that has no
// ValueAnnotation yet gets the value of the first ConfigMap key its containers' environment
// reads (env[].valueFrom.configMapKeyRef), read at that moment, as a kubelet resolves a
// container's environment when it starts it. kwok then makes the Pod ready, or not.
func Resolve(ctx context.Context, c client.Client) {
	tick := time.NewTicker(resolveInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.MatchingFields{"spec.nodeName": NodeName}); err != nil {
			continue
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Annotations[ValueAnnotation] == "" && p.DeletionTimestamp.IsZero() {
				_ = resolve(ctx, c, p)
			}
		}
	}
}

// resolve records on a Pod the value it reads.
func resolve(ctx context.Context, c client.Client, p *corev1.Pod) error {
	value := "none"
	for _, ct := range p.Spec.Containers {
		for _, e := range ct.Env {
			if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, cm); err != nil {
				return err // not there yet: a kubelet would not start it either
			}
			value = cm.Data[ref.Key]
			if value == "" {
				return errors.New("no value yet")
			}
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ValueAnnotation: value}}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch))
}

// Deployment is a Deployment of one replica on the simulated Node, whose container reads key of
// ConfigMap configMap from its environment: the application whose Pods refuse BadValue.
func Deployment(namespace, name, configMap, key string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeName: NodeName, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app", Env: []corev1.EnvVar{{Name: "VALUE", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Key: key}}}}}},
		}},
	}}
}
