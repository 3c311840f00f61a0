package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// pollInterval is how often Start checks whether a component is ready.
const pollInterval = 250 * time.Millisecond

// sysctls are what a node needs of the kernel: forwarding for the pods' traffic, bridged
// traffic through iptables for Services, and more inotify instances than the default 128.
var sysctls = map[string]string{
	"net/ipv4/ip_forward":                "1",
	"net/bridge/bridge-nf-call-iptables": "1",
	"fs/inotify/max_user_instances":      "1024",
	"fs/inotify/max_user_watches":        "524288",
}

// prepareHost writes the cluster's files, sets the kernel's settings and creates the bridge
// with the host's address on it.
func (c *Cluster) prepareHost(context.Context) error {
	for _, d := range []string{"pki", "logs", "etcd", "kubelet", "containerd"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	for key, value := range sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
	}
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	c.ports = ports
	l := layout{Dir: c.dir, ContainerdSocket: c.socket, CNIBinDir: c.opts.CNIBinDir, PauseImage: PauseImage,
		Bridge: Bridge, HostIP: HostIP, PodCIDR: PodCIDR, NodeName: NodeName,
		KubeletPort: ports[portKubelet], ProxyHealthPort: ports[portProxyHealth], ProxyMetricsPort: ports[portProxyMetrics]}
	if err := writeConfigs(l); err != nil {
		return err
	}
	if err := createBridge(); err != nil {
		return err
	}
	return writePKI(filepath.Join(c.dir, "pki"), url("https", HostIP, ports[portAPIServer]))
}

// The ports of prepareHost.
const (
	portAPIServer = iota
	portEtcd
	portEtcdPeer
	portKubelet
	portProxyHealth
	portProxyMetrics
)

// createBridge creates the pods' bridge with the host's address (the bridge CNI plugin takes
// it as it is), so that the API server can serve on HostIP before the first pod.
func createBridge() error {
	_ = deleteBridge()
	for _, args := range [][]string{
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", HostIP + "/24", "dev", Bridge},
		{"link", "set", Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}

func deleteBridge() error {
	if out, err := exec.Command("ip", "link", "del", Bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting the bridge %s: %w: %s", Bridge, err, out)
	}
	return nil
}

// startControlPlane starts etcd and kube-apiserver and waits until the API server is ready,
// then starts kube-controller-manager and kube-scheduler.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	etcd, peer := url("http", "127.0.0.1", c.ports[portEtcd]), url("http", "127.0.0.1", c.ports[portEtcdPeer])
	if err := c.launch("etcd", c.bin("etcd"), "--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+etcd, "--advertise-client-urls="+etcd, "--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer, "--initial-cluster=default="+peer, "--unsafe-no-fsync"); err != nil {
		return err
	}
	if err := c.launch("kube-apiserver", c.bin("kube-apiserver"), c.apiServerArgs(etcd)...); err != nil {
		return err
	}
	cfg, err := c.adminConfig()
	if err != nil {
		return err
	}
	c.Config = cfg
	ready, err := readyz(cfg)
	if err != nil {
		return err
	}
	if err := c.poll(ctx, "the API server to be ready", ready); err != nil {
		return err
	}
	if err := c.launch("kube-controller-manager", c.bin("kube-controller-manager"),
		"--kubeconfig="+c.pki("controller-manager.kubeconfig"), "--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials", "--service-account-private-key-file="+c.pki("sa.key"),
		"--root-ca-file="+c.pki("ca.crt"), "--service-cluster-ip-range="+ServiceCIDR); err != nil {
		return err
	}
	return c.launch("kube-scheduler", c.bin("kube-scheduler"),
		"--kubeconfig="+c.pki("scheduler.kubeconfig"), "--secure-port=0", "--leader-elect=false")
}

func (c *Cluster) apiServerArgs(etcd string) []string {
	return []string{
		"--etcd-servers=" + etcd, "--bind-address=" + HostIP, "--advertise-address=" + HostIP,
		"--secure-port=" + strconv.Itoa(c.ports[portAPIServer]),
		"--tls-cert-file=" + c.pki("apiserver.crt"), "--tls-private-key-file=" + c.pki("apiserver.key"),
		"--client-ca-file=" + c.pki("ca.crt"), "--service-cluster-ip-range=" + ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki("sa.pub"), "--service-account-signing-key-file=" + c.pki("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + c.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + c.pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + c.pki("ca.crt"), "--kubelet-preferred-address-types=InternalIP",
		"--audit-policy-file=" + filepath.Join(c.dir, "audit-policy.yaml"), "--audit-log-path=" + c.auditLog(),
		"--profiling=false",
	}
}

// startContainerd starts containerd and imports the pause image and Options.Images into it.
func (c *Cluster) startContainerd(ctx context.Context) error {
	if err := c.launch("containerd", "containerd", "--config="+filepath.Join(c.dir, "containerd.toml")); err != nil {
		return err
	}
	if err := c.poll(ctx, "containerd to serve", func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "--address", c.socket, "version").Run()
	}); err != nil {
		return err
	}
	pause, err := buildPauseImage(ctx, c.dir)
	if err != nil {
		return err
	}
	for _, image := range append([]string{pause}, c.opts.Images...) {
		out, err := exec.CommandContext(ctx, "ctr", "--address", c.socket, "--namespace", "k8s.io", "images", "import", image).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing the image %s into containerd: %w: %s", image, err, out)
		}
	}
	return nil
}

// startNode starts the kubelet and kube-proxy.
func (c *Cluster) startNode(context.Context) error {
	if err := c.launch("kubelet", c.bin("kubelet"), "--config="+filepath.Join(c.dir, "kubelet.yaml"),
		"--kubeconfig="+c.pki("kubelet.kubeconfig"), "--root-dir="+filepath.Join(c.dir, "kubelet"),
		"--hostname-override="+NodeName, "--node-ip="+HostIP); err != nil {
		return err
	}
	return c.launch("kube-proxy", c.bin("kube-proxy"), "--config="+filepath.Join(c.dir, "kube-proxy.yaml"))
}

// waitReady waits for the node to be Ready, the default ServiceAccount to exist, and the
// kubernetes Service to answer at its ClusterIP (through kube-proxy's rules).
func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("creating a clientset: %w", err)
	}
	if err := c.poll(ctx, "the node to be Ready", func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready: %v", NodeName, node.Status.Conditions)
	}); err != nil {
		return err
	}
	if err := c.poll(ctx, "the default ServiceAccount", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	viaService := rest.CopyConfig(c.Config)
	viaService.Host = url("https", KubernetesServiceIP, 443)
	answers, err := readyz(viaService)
	if err != nil {
		return err
	}
	return c.poll(ctx, "the kubernetes Service to answer at "+KubernetesServiceIP, answers)
}

// poll calls check until it succeeds, a component exits or ctx ends; the error says what was
// awaited and the last check's error.
func (c *Cluster) poll(ctx context.Context, what string, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.processes {
			if err := p.exited(); err != nil {
				return false, err
			}
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last: %w)", what, err, last)
	}
	return nil
}

// readyz returns a check of an API server's /readyz, for poll: one client for every call.
func readyz(cfg *rest.Config) (func(context.Context) error, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a clientset: %w", err)
	}
	return func(ctx context.Context) error {
		if body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return fmt.Errorf("/readyz: %w: %s", err, body)
		}
		return nil
	}, nil
}
