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
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// DefaultStartTimeout is the default for Options.StartTimeout.
	DefaultStartTimeout = 2 * time.Minute

	// stopTimeout is how long each process gets to exit after SIGTERM before it is killed.
	stopTimeout = 20 * time.Second

	etcdBinary              = "etcd"
	apiServerBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
)

// Options configure a control plane of Start. Each field's comment says its default.
type Options struct {
	// BinaryAssetsDirectory holds etcd, kube-apiserver and kube-controller-manager.
	// Defaults to $KUBEBUILDER_ASSETS.
	BinaryAssetsDirectory string

	// CRDs are installed into every control plane before Start returns (envtest
	// CRDInstallOptions). Each control plane gets its own deep copy. Defaults to none.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// GarbageCollector also starts, per control plane, a kube-controller-manager that runs only
	// the garbagecollector controller, and waits until it has collected a probe object before
	// Start returns. Resources of CRDs created after Start are noticed by the collector's
	// periodic discovery, i.e. within about a minute. Defaults to false.
	GarbageCollector bool

	// Controllers are more kube-controller-manager controllers to run with the garbage collector
	// (GarbageCollector must be set), such as "deployment" and "replicaset" for a member whose
	// Deployments get Pods. Defaults to none.
	Controllers []string

	// StartTimeout bounds the start of each control plane: etcd and kube-apiserver each get
	// this long to become healthy, and the whole start (CRDs and the garbage collector
	// included) must be done within it. Defaults to DefaultStartTimeout (2 minutes).
	StartTimeout time.Duration

	// AuditWrites makes the kube-apiserver log every write request it serves (create, update,
	// patch, delete) to an audit log, read with ControlPlane.Writes: who wrote what, counted on
	// the server's side. The reviews of the authentication and authorization APIs, creates that
	// store nothing, are not logged. Defaults to false.
	AuditWrites bool

	// WithoutAdmissionPolicies makes the kube-apiserver serve no admissionregistration.k8s.io/v1
	// (and run none of its admission plugins), as a Kubernetes before 1.30 serves no
	// ValidatingAdmissionPolicy. Defaults to false.
	WithoutAdmissionPolicies bool

	// Fsync keeps etcd's fsync of every write, as a real cluster's etcd does: a benchmark's
	// floor and hub then pay what they would pay there. Defaults to false: a test's etcd never
	// outlives the machine, so its writes skip the fsync.
	Fsync bool

	// Output receives the control-plane processes' stdout/stderr, one line at a time, each
	// prefixed with "<name>/<binary>: ". Writes are serialized, so any io.Writer will do.
	// Defaults to nil: the output is discarded.
	Output io.Writer
}

// ControlPlane is one running control plane: an etcd, a kube-apiserver and, with
// Options.GarbageCollector, a kube-controller-manager. It is safe for concurrent use.
//
// Call Stop when done. If this process dies without it, the kube-controller-manager and the
// kube-apiservers of StartAPIServer and SecondAPIServer die too (on Linux), but etcd and the
// kube-apiserver envtest started keep running, and the temporary directory remains.
type ControlPlane struct {
	// Name is the Plane's name. It names the kubeconfig's cluster, user and context.
	Name string

	// Config is the admin (system:masters) client config. Copy it (rest.CopyConfig) before
	// modifying it.
	Config *rest.Config

	// KubeconfigPath is the file holding Kubeconfig(), in the control plane's temporary
	// directory (for kubectl and other processes). It is removed by Stop.
	KubeconfigPath string

	dir        string
	host       string
	certDir    string
	kubeconfig []byte
	env        *envtest.Environment
	kcm        *process // nil without Options.GarbageCollector
	out        *output  // nil: output discarded
	writers    []*lineWriter

	// The kube-apiserver's streams, kept for StartAPIServer.
	apiServerOut, apiServerErr io.Writer
	// apiServerEnv is added to the kube-apiserver's environment (SharedOptions.Env), kept for
	// StartAPIServer; nil for envtest's.
	apiServerEnv []string

	// mu guards env.AddUser (its CA is not goroutine-safe), paused, stopped and the fields
	// of KillAPIServer, StartAPIServer and SecondAPIServer below. It is not held while a
	// kube-apiserver is awaited.
	mu      sync.Mutex
	paused  bool
	stopped bool
	stopErr error

	apiServerCommand []string     // the kube-apiserver's command line, binary first; recorded when first needed
	killed           bool         // the kube-apiserver was killed by KillAPIServer and not started again
	apiServer        *process     // the kube-apiserver started by StartAPIServer; nil: envtest's, or none
	second           *process     // the kube-apiserver of SecondAPIServer; nil: none
	secondConfig     *rest.Config // its admin client config
}

// Plane is one control plane for Start: its name and its own options.
type Plane struct {
	// Name names the control plane, its kubeconfig's cluster, user and context; a DNS-1123
	// label, unique among the planes of one Start.
	Name string
	Options
}

// Named returns one Plane per name, all with opts.
func Named(opts Options, names ...string) []Plane {
	planes := make([]Plane, 0, len(names))
	for _, name := range names {
		planes = append(planes, Plane{Name: name, Options: opts})
	}
	return planes
}

// Start starts the control planes, all in parallel, each with its own options, and returns
// them in the order given once every one is ready: kube-apiserver healthy, the default
// namespace present, its CRDs established and, with GarbageCollector, the garbage collector
// working.
//
// If any control plane fails to start, Start stops the ones that did start and returns
// the failures joined (errors.Join). ctx is checked between the start phases; the start
// of etcd and kube-apiserver cannot be interrupted and is bounded by Options.StartTimeout.
func Start(ctx context.Context, planes ...Plane) ([]*ControlPlane, error) {
	if len(planes) == 0 {
		return nil, errors.New("no control planes given")
	}
	seen := make(map[string]bool, len(planes))
	for i, p := range planes {
		if errs := validation.IsDNS1123Label(p.Name); len(errs) > 0 {
			return nil, fmt.Errorf("invalid control-plane name %q: %v", p.Name, errs)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("duplicate control-plane name %q", p.Name)
		}
		seen[p.Name] = true
		if err := planes[i].complete(); err != nil {
			return nil, fmt.Errorf("control plane %q: %w", p.Name, err)
		}
	}

	var (
		cps  = make([]*ControlPlane, len(planes))
		errs = make([]error, len(planes))
		wg   sync.WaitGroup
	)
	for i, p := range planes {
		wg.Go(func() {
			cp, err := start(ctx, p.Name, p.Options, newOutput(p.Output))
			if err != nil {
				errs[i] = fmt.Errorf("control plane %q: %w", p.Name, err)
				return
			}
			cps[i] = cp
		})
	}
	wg.Wait()

	if err := errors.Join(errs...); err != nil {
		var started []*ControlPlane
		for _, cp := range cps {
			if cp != nil {
				started = append(started, cp)
			}
		}
		return nil, errors.Join(err, StopAll(started))
	}
	return cps, nil
}

// complete defaults opts and checks that the binaries it needs exist.
func (o *Options) complete() error {
	if o.BinaryAssetsDirectory == "" {
		o.BinaryAssetsDirectory = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if o.BinaryAssetsDirectory == "" {
		return errors.New("no binaries: Options.BinaryAssetsDirectory is empty and KUBEBUILDER_ASSETS is not set")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	binaries := []string{etcdBinary, apiServerBinary}
	if o.GarbageCollector {
		binaries = append(binaries, controllerManagerBinary)
	}
	for _, b := range binaries {
		path := filepath.Join(o.BinaryAssetsDirectory, b)
		if _, err := exec.LookPath(path); err != nil {
			return fmt.Errorf("binary %s not usable: %w", b, err)
		}
	}
	return nil
}

// start starts the control plane name; on failure it leaves nothing behind.
func start(ctx context.Context, name string, opts Options, out *output) (_ *ControlPlane, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "controlplane-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	cp := &ControlPlane{Name: name, dir: dir, certDir: filepath.Join(dir, "apiserver"), out: out}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, cp.Stop())
		}
	}()

	etcdDir := filepath.Join(dir, "etcd")
	for _, d := range []string{cp.certDir, etcdDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}

	if cp.env, err = cp.environment(opts, etcdDir, out); err != nil {
		return nil, err
	}
	cfg, err := cp.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	cp.Config = cfg
	cp.host = cp.env.ControlPlane.APIServer.HostPort()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	if cp.kubeconfig, err = KubeconfigFor(name, cfg); err != nil {
		return nil, err
	}
	cp.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.KubeconfigPath, cp.kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}

	if opts.GarbageCollector {
		if err := cp.startGarbageCollector(ctx, opts.BinaryAssetsDirectory, opts.Controllers, out); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// environment is the envtest environment of etcd and kube-apiserver, with etcd's data in
// etcdDir, the kube-apiserver with Options.AuditWrites.
func (c *ControlPlane) environment(opts Options, etcdDir string, out *output) (*envtest.Environment, error) {
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(opts.CRDs))
	for _, crd := range opts.CRDs {
		crds = append(crds, crd.DeepCopy()) // envtest's create fills in the object
	}
	etcdOut, etcdErr := c.streams(out, etcdBinary)
	apiOut, apiErr := c.streams(out, apiServerBinary)
	c.apiServerOut, c.apiServerErr = apiOut, apiErr
	bin := opts.BinaryAssetsDirectory
	apiServer := &envtest.APIServer{
		Path:    filepath.Join(bin, apiServerBinary),
		CertDir: c.certDir,
		Out:     apiOut,
		Err:     apiErr,
	}
	// Thousands of objects deleted in one request (a test's cleanup) are deleted by parallel workers.
	apiServer.Configure().Set("delete-collection-workers", "8")
	if opts.WithoutAdmissionPolicies {
		apiServer.Configure().Set("runtime-config", "admissionregistration.k8s.io/v1=false")
		apiServer.Configure().Set("disable-admission-plugins", strings.Join([]string{"ServiceAccount", "ValidatingAdmissionPolicy",
			"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook", "MutatingAdmissionPolicy"}, ","))
	}
	if opts.AuditWrites {
		args, err := c.auditArgs()
		if err != nil {
			return nil, err
		}
		flags := apiServer.Configure()
		for name, value := range args {
			flags.Set(name, value)
		}
	}
	etcd := &envtest.Etcd{Path: filepath.Join(bin, etcdBinary), DataDir: etcdDir, Out: etcdOut, Err: etcdErr}
	if !opts.Fsync {
		etcd.Configure().Set("unsafe-no-fsync", "true")
	}
	return &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd:      etcd,
			APIServer: apiServer,
		},
		BinaryAssetsDirectory:    bin,
		CRDs:                     crds,
		UseExistingCluster:       ptr.To(false),
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}, nil
}

// streams returns stdout and stderr writers for binary, or io.Discard for both without output.
func (c *ControlPlane) streams(out *output, binary string) (stdout, stderr io.Writer) {
	if out == nil {
		return io.Discard, io.Discard
	}
	prefix := c.Name + "/" + binary + ": "
	o, e := out.lineWriter(prefix), out.lineWriter(prefix)
	c.writers = append(c.writers, o, e)
	return o, e
}

// KubeconfigFor renders a self-contained kubeconfig for a client config: its server, CA data
// (or insecure-skip-tls-verify), and client certificate data or bearer token, in a cluster,
// user and context all named name, so that several can be merged.
func KubeconfigFor(name string, cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering kubeconfig: %w", err)
	}
	return b, nil
}

// Kubeconfig returns a self-contained kubeconfig (certificates embedded) for the admin
// user, with one cluster, user and context, each named after Name. The caller may modify
// the returned slice.
func (c *ControlPlane) Kubeconfig() []byte {
	return append([]byte(nil), c.kubeconfig...)
}

// Host returns the kube-apiserver's host:port, e.g. "127.0.0.1:38271".
func (c *ControlPlane) Host() string {
	return c.host
}

// AddUser provisions a client-certificate identity with the given user name and groups
// and returns a client config for it. Unlike Config, it has no permissions until RBAC
// grants them (unless groups include system:masters).
func (c *ControlPlane) AddUser(name string, groups []string) (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, fmt.Errorf("control plane %q is stopped", c.Name)
	}
	if c.env == nil {
		return nil, fmt.Errorf("control plane %q of a Shared fleet: adding a user: %w", c.Name, errors.ErrUnsupported)
	}
	user, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, rest.CopyConfig(c.Config))
	if err != nil {
		return nil, fmt.Errorf("adding user %q to control plane %q: %w", name, c.Name, err)
	}
	return rest.CopyConfig(user.Config()), nil
}

// APIServerPID returns the process id of the running kube-apiserver, for its resource usage.
// Linux only for control planes of Start; elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func (c *ControlPlane) APIServerPID() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return 0, fmt.Errorf("control plane %q is stopped", c.Name)
	}
	if c.apiServer != nil {
		return c.apiServer.cmd.Process.Pid, nil
	}
	pid, err := findAPIServerPID(c.certDir)
	if err != nil {
		return 0, fmt.Errorf("control plane %q: %w", c.Name, err)
	}
	return pid, nil
}

// Pause freezes the kube-apiserver with SIGSTOP, simulating a hung member, and returns once
// every thread of it is stopped: connections are still accepted by the kernel but no request
// is answered until Resume. etcd and the
// kube-controller-manager keep running. Pausing a paused control plane does nothing.
// Pause works on Linux only; elsewhere it returns an error wrapping errors.ErrUnsupported.
func (c *ControlPlane) Pause() error {
	return c.setPaused(true)
}

// Resume thaws a kube-apiserver frozen by Pause with SIGCONT. Resuming a control plane
// that is not paused does nothing. Linux only, like Pause.
func (c *ControlPlane) Resume() error {
	return c.setPaused(false)
}

func (c *ControlPlane) setPaused(pause bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("control plane %q is stopped", c.Name)
	}
	if c.paused == pause {
		return nil
	}
	if err := signalAPIServer(c.certDir, pause); err != nil {
		return fmt.Errorf("control plane %q: %w", c.Name, err)
	}
	c.paused = pause
	return nil
}

// Stop stops the kube-controller-manager, the second kube-apiserver if any, the kube-apiserver
// (resuming it first if it is paused, and whether envtest or StartAPIServer started it) and
// etcd, and removes the control plane's temporary directory, including its
// data and KubeconfigPath. Stop is idempotent: later calls return the first call's result.
func (c *ControlPlane) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true

	var errs []error
	if c.kcm != nil {
		if err := c.kcm.stop(stopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", controllerManagerBinary, err))
		}
	}
	if c.second != nil {
		if err := c.second.stop(stopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", secondAPIServerName, err))
		}
	}
	if c.paused {
		if err := signalAPIServer(c.certDir, false); err != nil {
			errs = append(errs, fmt.Errorf("resuming paused %s: %w", apiServerBinary, err))
		}
		c.paused = false
	}
	if c.apiServer != nil {
		if err := c.apiServer.stop(stopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("stopping the restarted %s: %w", apiServerBinary, err))
		}
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and %s: %w", apiServerBinary, err))
		}
	}
	for _, w := range c.writers {
		w.flush() // the processes are gone, so nothing writes concurrently
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", c.dir, err))
	}
	if err := errors.Join(errs...); err != nil {
		c.stopErr = fmt.Errorf("stopping control plane %q: %w", c.Name, err)
	}
	return c.stopErr
}

// StopAll stops all control planes in parallel and returns their errors joined.
// Nil entries are skipped.
func StopAll(cps []*ControlPlane) error {
	errs := make([]error, len(cps))
	var wg sync.WaitGroup
	for i, cp := range cps {
		if cp == nil {
			continue
		}
		wg.Go(func() { errs[i] = cp.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
