package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const (
	// gcProbeInterval is how often Start checks whether the garbage collector has
	// collected its probe object.
	gcProbeInterval = 200 * time.Millisecond
	// gcProbeNamespace holds the probe objects; it exists as soon as envtest returns.
	gcProbeNamespace = "default"
	// tailBytes is how much of a failed process's output goes into the error.
	tailBytes = 2048
)

// controllerManagerUser is the identity of the kube-controller-manager, as a kubeadm cluster's
// is: its controllers do not use service-account credentials, so the garbage collector's
// requests come from this user (in system:masters here, for every right it needs).
const controllerManagerUser = "system:kube-controller-manager"

// controllerManagerArgs are the kube-controller-manager flags: only the garbage collector (and
// the controllers named), no leader election (so it starts at once), its own credentials
// (controllerManagerUser) for every controller client, no serving endpoint, and a client rate
// limit fit for tests that create and delete many objects.
func controllerManagerArgs(kubeconfig string, controllers []string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(append([]string{"garbagecollector"}, controllers...), ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	}
}

// startGarbageCollector starts the kube-controller-manager and waits until the garbage
// collector has collected a probe object, so that Start returns a working collector.
func (c *ControlPlane) startGarbageCollector(ctx context.Context, bin string, controllers []string, out *output) error {
	user, err := c.AddUser(controllerManagerUser, []string{"system:masters"})
	if err != nil {
		return err
	}
	kc, err := KubeconfigFor(c.Name, user)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.dir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("writing the kube-controller-manager's kubeconfig: %w", err)
	}
	stdout, stderr := c.streams(out, controllerManagerBinary)
	tail := &tailBuffer{max: tailBytes}
	kcm, err := startProcess(filepath.Join(bin, controllerManagerBinary), controllerManagerArgs(kubeconfig, controllers),
		io.MultiWriter(stdout, tail), io.MultiWriter(stderr, tail))
	if err != nil {
		return fmt.Errorf("starting %s: %w", controllerManagerBinary, err)
	}
	c.kcm = kcm

	if err := waitForGarbageCollector(ctx, c.Config, kcm.done); err != nil {
		if kcm.exited() {
			return fmt.Errorf("%s exited: %w; output ends with:\n%s", controllerManagerBinary, kcm.err, tail)
		}
		return fmt.Errorf("waiting for the garbage collector: %w", err)
	}
	return nil
}

// waitForGarbageCollector creates a ConfigMap owned by another ConfigMap, deletes the
// owner and waits until the dependent is gone: the garbage collector really works.
// It gives up when ctx is done or exited is closed.
func waitForGarbageCollector(ctx context.Context, cfg *rest.Config, exited <-chan struct{}) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	cms := cs.CoreV1().ConfigMaps(gcProbeNamespace)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "controlplane-gc-probe-owner-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating probe owner: %w", err)
	}
	dependent, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "controlplane-gc-probe-dependent-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating probe dependent: %w", err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}); err != nil {
		return fmt.Errorf("deleting probe owner: %w", err)
	}

	ticker := time.NewTicker(gcProbeInterval)
	defer ticker.Stop()
	for {
		_, err := cms.Get(ctx, dependent.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("probe ConfigMap %s/%s not collected: %w", gcProbeNamespace, dependent.Name, ctx.Err())
		case <-exited:
			return errors.New("process exited")
		case <-ticker.C:
		}
	}
}

// process is a child process that dies with its parent (on Linux) and can be stopped.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and err is set
	err  error
}

func startProcess(path string, args []string, stdout, stderr io.Writer) (*process, error) {
	return startProcessEnv(path, args, nil, stdout, stderr)
}

// startProcessEnv starts a process like startProcess, with env added to this process's
// environment.
func startProcessEnv(path string, args, env []string, stdout, stderr io.Writer) (*process, error) {
	cmd := exec.Command(path, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and, if the process has not exited after timeout, SIGKILL.
// How the process exits is not an error.
func (p *process) stop(timeout time.Duration) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !p.exited() {
		return fmt.Errorf("sending SIGTERM: %w", err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && !p.exited() {
		return fmt.Errorf("killing after %s: %w", timeout, err)
	}
	<-p.done
	return fmt.Errorf("killed: no exit within %s of SIGTERM", timeout)
}
