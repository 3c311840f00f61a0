package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// DefaultSharedParallel is the default of SharedOptions.Parallel.
	DefaultSharedParallel = 4
	// startAttempts is how often a kube-apiserver of a Shared fleet is started before Add gives
	// up: its port, free a moment before, may be taken meanwhile by another process.
	startAttempts = 3
	// etcdQuota is the shared etcd's backend quota: room for many members' objects.
	etcdQuota = 8 << 30
	// failedStartStopTimeout is how long a kube-apiserver that did not get ready gets to exit.
	failedStartStopTimeout = 5 * time.Second
)

// DefaultSharedEnv is the default of SharedOptions.Env: one thread of Go code per kube-apiserver
// (many of them share few cores) and a garbage collector that keeps the heap within 25% of
// what is live (measured: 84 MiB of anonymous memory per idle kube-apiserver, 0.55% of a core,
// against 117 MiB and 0.85% with Go's defaults).
var DefaultSharedEnv = []string{"GOMAXPROCS=1", "GOGC=25"}

// SharedOptions configure a Shared fleet. Each field's comment says its default.
type SharedOptions struct {
	// BinaryAssetsDirectory holds etcd and kube-apiserver. Defaults to $KUBEBUILDER_ASSETS.
	BinaryAssetsDirectory string
	// CRDs are installed into every control plane before Add returns. Defaults to none.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// AuditWrites makes every kube-apiserver log the writes it serves, as Options.AuditWrites.
	AuditWrites bool
	// StartTimeout bounds the start of the etcd and of each kube-apiserver (CRDs included).
	// Defaults to DefaultStartTimeout.
	StartTimeout time.Duration
	// Parallel is how many kube-apiservers Add starts at once. Defaults to DefaultSharedParallel.
	Parallel int
	// Env is added to each kube-apiserver's environment. Defaults to DefaultSharedEnv; an
	// empty, non-nil slice adds nothing.
	Env []string
	// Output receives the processes' output, as Options.Output. Defaults to nil: discarded.
	Output io.Writer
}

// Shared is a fleet of slim control planes on one etcd: each control plane is a real
// kube-apiserver (TLS, authentication, RBAC, admission, watch cache, its own storage prefix
// in the shared etcd, its own audit log) that serves only the API groups a multi-cluster
// controller of ConfigMaps and CRDs needs, without the work of a cluster with nodes and
// workloads (see slimAPIServerArgs). It is how one machine hosts a hundred members. The
// control planes Add returns support what a ControlPlane does except AddUser and the
// garbage collector. Shared is safe for concurrent use.
type Shared struct {
	opts    SharedOptions
	dir     string
	certs   *sharedCerts
	etcd    *process
	etcdURL string
	out     *output

	mu      sync.Mutex
	planes  []*ControlPlane
	names   map[string]bool
	stopped bool
}

// StartShared starts the shared etcd of a fleet; Add starts its control planes.
func StartShared(ctx context.Context, opts SharedOptions) (_ *Shared, retErr error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "controlplane-shared-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	s := &Shared{opts: opts, dir: dir, out: newOutput(opts.Output), names: map[string]bool{}}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, s.Stop())
		}
	}()
	if s.certs, err = newSharedCerts(dir); err != nil {
		return nil, err
	}
	if err := s.startEtcd(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// complete defaults opts and checks that the binaries exist.
func (o *SharedOptions) complete() error {
	base := Options{BinaryAssetsDirectory: o.BinaryAssetsDirectory, StartTimeout: o.StartTimeout}
	if err := base.complete(); err != nil {
		return err
	}
	o.BinaryAssetsDirectory, o.StartTimeout = base.BinaryAssetsDirectory, base.StartTimeout
	if o.Parallel <= 0 {
		o.Parallel = DefaultSharedParallel
	}
	if o.Env == nil {
		o.Env = DefaultSharedEnv
	}
	return nil
}

// startEtcd starts the shared etcd on a free port and waits until it is healthy.
func (s *Shared) startEtcd(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--data-dir=" + filepath.Join(s.dir, "etcd"), "--listen-client-urls=" + s.etcdURL,
		"--advertise-client-urls=" + s.etcdURL, "--listen-peer-urls=http://localhost:0", "--unsafe-no-fsync=true",
		"--quota-backend-bytes=" + strconv.Itoa(etcdQuota)}
	stdout, stderr := s.streams("shared", etcdBinary)
	tail := &tailBuffer{max: tailBytes}
	s.etcd, err = startProcess(filepath.Join(s.opts.BinaryAssetsDirectory, etcdBinary), args,
		io.MultiWriter(stdout, tail), io.MultiWriter(stderr, tail))
	if err != nil {
		return fmt.Errorf("starting the shared etcd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, readyPollInterval, true, func(ctx context.Context) (bool, error) {
		if s.etcd.exited() {
			return false, errors.New("exited")
		}
		return etcdHealthy(ctx, s.etcdURL), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the shared etcd: %w; its output ends with:\n%s", err, tail)
	}
	return nil
}

// etcdHealthy reports whether the etcd at base answers its health check.
func etcdHealthy(ctx context.Context, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}

// streams returns the output writers of one process of plane.
func (s *Shared) streams(plane, binary string) (stdout, stderr io.Writer) {
	if s.out == nil {
		return io.Discard, io.Discard
	}
	prefix := plane + "/" + binary + ": "
	return s.out.lineWriter(prefix), s.out.lineWriter(prefix)
}

// EtcdPID is the shared etcd's process id.
func (s *Shared) EtcdPID() int { return s.etcd.cmd.Process.Pid }

// Planes returns the control planes started so far, in the order they were added.
func (s *Shared) Planes() []*ControlPlane {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*ControlPlane(nil), s.planes...)
}

// Add starts one control plane per name, SharedOptions.Parallel at a time, and returns them
// in the order given once every one is ready: kube-apiserver ready, kube-system present, CRDs
// established. Names are DNS-1123 labels, unique in the fleet. On failure the control planes
// of this call that did start are stopped, and the fleet is left as it was.
func (s *Shared) Add(ctx context.Context, names ...string) ([]*ControlPlane, error) {
	if err := s.reserve(names); err != nil {
		return nil, err
	}
	cps := make([]*ControlPlane, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, s.opts.Parallel)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cps[i], errs[i] = s.startPlane(ctx, name)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.release(names)
		return nil, errors.Join(err, StopAll(cps))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planes = append(s.planes, cps...)
	return cps, nil
}

// reserve checks names and marks them taken.
func (s *Shared) reserve(names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("the shared fleet is stopped")
	}
	for i, name := range names {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("invalid control-plane name %q: %v", name, errs)
		}
		if s.names[name] || slices.Index(names, name) != i {
			return fmt.Errorf("duplicate control-plane name %q", name)
		}
	}
	for _, name := range names {
		s.names[name] = true
	}
	return nil
}

func (s *Shared) release(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		delete(s.names, name)
	}
}

// startPlane starts the kube-apiserver of one control plane, retrying on another port if it
// exits at start, and readies it.
func (s *Shared) startPlane(ctx context.Context, name string) (*ControlPlane, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	dir := filepath.Join(s.dir, name)
	cp := &ControlPlane{Name: name, dir: dir, certDir: filepath.Join(dir, "apiserver"), out: s.out, apiServerEnv: s.opts.Env}
	if err := os.MkdirAll(cp.certDir, 0o700); err != nil {
		return nil, fmt.Errorf("control plane %q: %w", name, err)
	}
	var err error
	for range startAttempts {
		if err = s.startAPIServer(ctx, cp); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err == nil {
		err = s.ready(ctx, cp)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("control plane %q: %w", name, err), cp.Stop())
	}
	return cp, nil
}

// startAPIServer starts cp's kube-apiserver on a free port and waits until it is ready; if it
// does not get ready, it is stopped.
func (s *Shared) startAPIServer(ctx context.Context, cp *ControlPlane) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := slimAPIServerArgs(cp.Name, port, s.etcdURL, s.certs, cp.certDir)
	if s.opts.AuditWrites {
		audit, err := cp.auditArgs()
		if err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(audit)) {
			args = append(args, "--"+name+"="+audit[name])
		}
	}
	cp.host = "127.0.0.1:" + strconv.Itoa(port)
	cp.Config = &rest.Config{Host: "https://" + cp.host,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.certs.CAData, CertData: s.certs.AdminCert, KeyData: s.certs.AdminKey}}
	stdout, stderr := s.streams(cp.Name, apiServerBinary)
	tail := &tailBuffer{max: tailBytes}
	cp.apiServerOut, cp.apiServerErr = io.MultiWriter(stdout, tail), io.MultiWriter(stderr, tail)
	p, err := startProcessEnv(filepath.Join(s.opts.BinaryAssetsDirectory, apiServerBinary), args, cp.apiServerEnv, cp.apiServerOut, cp.apiServerErr)
	if err != nil {
		return fmt.Errorf("starting %s: %w", apiServerBinary, err)
	}
	if err := waitReady(ctx, cp.Config, p.done); err != nil {
		_ = p.stop(failedStartStopTimeout)
		return fmt.Errorf("waiting for %s: %w; its output ends with:\n%s", apiServerBinary, err, tail)
	}
	cp.apiServer = p
	return nil
}

// ready waits for kube-system, installs the CRDs and writes the kubeconfig.
func (s *Shared) ready(ctx context.Context, cp *ControlPlane) error {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, readyPollInterval, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s: %w", metav1.NamespaceSystem, err)
	}
	if len(s.opts.CRDs) > 0 {
		crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(s.opts.CRDs))
		for _, crd := range s.opts.CRDs {
			crds = append(crds, crd.DeepCopy())
		}
		deadline, _ := ctx.Deadline()
		if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: crds, MaxTime: time.Until(deadline)}); err != nil {
			return fmt.Errorf("installing CRDs: %w", err)
		}
	}
	if cp.kubeconfig, err = KubeconfigFor(cp.Name, cp.Config); err != nil {
		return err
	}
	cp.KubeconfigPath = filepath.Join(cp.dir, "kubeconfig")
	if err := os.WriteFile(cp.KubeconfigPath, cp.kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// Stop stops every control plane, then the etcd, and removes the fleet's directory. It is
// idempotent.
func (s *Shared) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	planes := s.planes
	s.mu.Unlock()
	err := StopAll(planes)
	if s.etcd != nil {
		if stopErr := s.etcd.stop(stopTimeout); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the shared etcd: %w", stopErr))
		}
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	return err
}
