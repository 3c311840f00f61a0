package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"configbundle.dev/hub/internal/testing/controlplane"
)

// The cluster's fixed addresses: one cluster runs on a machine at a time.
const (
	// NodeName is the node's name.
	NodeName = "configbundle-node"
	// Bridge is the pods' bridge; HostIP, its address, is the host's address for pods: the API
	// server serves on it, and so should anything else pods must reach on the host.
	Bridge = "cbh0"
	HostIP = "10.244.0.1"
	// PodCIDR is the pods' network; ServiceCIDR the Services' and KubernetesServiceIP the
	// ClusterIP of the kubernetes Service, the first of ServiceCIDR.
	PodCIDR             = "10.244.0.0/24"
	ServiceCIDR         = "10.96.0.0/16"
	KubernetesServiceIP = "10.96.0.1"
	// PauseImage is the sandbox image, built from Kubernetes' pause.c and imported at start.
	PauseImage = "registry.k8s.io/pause:3.10"
)

// stopTimeout is how long each process gets between SIGTERM and SIGKILL.
const stopTimeout = 10 * time.Second

// Options configure Start. Each field's comment says its default.
type Options struct {
	// BinaryAssetsDirectory holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet, kube-proxy and kubectl (`hack/testbin.sh node`). Defaults to
	// $KUBEBUILDER_ASSETS.
	BinaryAssetsDirectory string

	// Images are image tars (docker-archive or OCI) imported into the node's containerd before
	// Start returns, under the names they carry, for pods with imagePullPolicy IfNotPresent or
	// Never. Defaults to none.
	Images []string

	// CNIBinDir holds the CNI plugins bridge, host-local, loopback and portmap. Defaults to
	// /usr/lib/cni (Debian's containernetworking-plugins).
	CNIBinDir string

	// StartTimeout bounds Start. Defaults to 5 minutes.
	StartTimeout time.Duration
}

func (o *Options) complete() {
	if o.BinaryAssetsDirectory == "" {
		o.BinaryAssetsDirectory = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/usr/lib/cni"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 5 * time.Minute
	}
}

// Cluster is a running single-node cluster. Call Stop when done.
type Cluster struct {
	// Config is the admin (system:masters) client config.
	Config *rest.Config
	// KubeconfigPath is the admin kubeconfig's file, for kubectl.
	KubeconfigPath string
	// Kubectl is the path of the kubectl binary of BinaryAssetsDirectory.
	Kubectl string

	opts      Options
	dir       string
	socket    string     // containerd's
	ports     []int      // see prepareHost
	processes []*process // in start order
}

// Start brings a cluster up: control plane, containerd with the images, kubelet and
// kube-proxy, and returns when the node is Ready and the kubernetes Service answers through
// kube-proxy's rules. On failure it tears down what it started.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	opts.complete()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := checkHost(opts); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cluster-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster's directory: %w", err)
	}
	c := &Cluster{opts: opts, dir: dir, socket: filepath.Join(dir, "containerd.sock"),
		KubeconfigPath: filepath.Join(dir, "pki", "admin.kubeconfig"), Kubectl: filepath.Join(opts.BinaryAssetsDirectory, "kubectl")}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, c.Stop())
		}
	}()
	for _, step := range []func(context.Context) error{
		c.prepareHost, c.startControlPlane, c.startContainerd, c.startNode, c.waitReady,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Dir is the cluster's directory: configuration, certificates, state and the components' logs
// (logs/NAME.log).
func (c *Cluster) Dir() string { return c.dir }

// checkHost fails early, and says what is missing, where the cluster cannot run.
func checkHost(opts Options) error {
	if os.Geteuid() != 0 {
		return errors.New("a cluster's node needs root (containerd, network, cgroups)")
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		if _, err := os.Stat(filepath.Join(opts.BinaryAssetsDirectory, b)); err != nil {
			missing = append(missing, b+" (run hack/testbin.sh node)")
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "conntrack", "ip", "gcc"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b+" (run hack/cluster-prereqs.sh)")
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(opts.CNIBinDir, p)); err != nil {
			missing = append(missing, "CNI plugin "+p+" (run hack/cluster-prereqs.sh)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("this machine cannot run a cluster: missing %v", missing)
	}
	return nil
}

// launch starts a component and remembers it for Stop.
func (c *Cluster) launch(name, binary string, args ...string) error {
	p, err := start(filepath.Join(c.dir, "logs"), name, binary, args...)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, p)
	return nil
}

// bin is the path of a Kubernetes binary.
func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinaryAssetsDirectory, name) }

// pki is the path of a file of the cluster's PKI.
func (c *Cluster) pki(name string) string { return filepath.Join(c.dir, "pki", name) }

// freePorts returns n free ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := controlplane.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// adminConfig loads the admin kubeconfig.
func (c *Cluster) adminConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("loading the admin kubeconfig: %w", err)
	}
	return cfg, nil
}

// url is an http(s) URL of host and port.
func url(scheme, host string, port int) string {
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// auditLog is the API server's audit log: every request of a service account.
func (c *Cluster) auditLog() string { return filepath.Join(c.dir, "logs", "audit.log") }
