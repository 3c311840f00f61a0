package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
)

// configs are the components' configuration files, rendered with a layout.
var configs = template.Must(template.New("").Parse(`
{{define "containerd.toml"}}version = 2
root = "{{.Dir}}/containerd/root"
state = "{{.Dir}}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{{.ContainerdSocket}}"
[ttrpc]
  address = "{{.ContainerdSocket}}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.PauseImage}}"
  # The sandbox has no CAP_SYS_RESOURCE: an oom_score_adj below containerd's own fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.Dir}}/cni/net.d"
{{end}}

{{define "10-bridge.conflist"}}{
  "cniVersion": "1.0.0",
  "name": "configbundle-test",
  "plugins": [
    {"type": "bridge", "bridge": "{{.Bridge}}", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "{{.Dir}}/cni/ipam",
              "ranges": [[{"subnet": "{{.PodCIDR}}", "gateway": "{{.HostIP}}"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
{{end}}

{{define "kubelet.yaml"}}apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1, which kubelet refuses by default.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{{.ContainerdSocket}}
address: {{.HostIP}}
port: {{.KubeletPort}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
tlsCertFile: {{.Dir}}/pki/kubelet-serving.crt
tlsPrivateKeyFile: {{.Dir}}/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: {{.Dir}}/pki/ca.crt}
authorization:
  mode: Webhook
clusterDomain: cluster.local
podCIDR: {{.PodCIDR}}
maxPods: 50
failSwapOn: false
rotateCertificates: false
serializeImagePulls: false
# A test machine's disk is often fuller than a node's: evict only when it is truly full, and
# never collect the imported images (they cannot be pulled again).
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
oomScoreAdj: 0
{{end}}

{{define "kube-proxy.yaml"}}apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {{.Dir}}/pki/kube-proxy.kubeconfig
hostnameOverride: {{.NodeName}}
clusterCIDR: {{.PodCIDR}}
bindAddress: {{.HostIP}}
healthzBindAddress: 127.0.0.1:{{.ProxyHealthPort}}
metricsBindAddress: 127.0.0.1:{{.ProxyMetricsPort}}
oomScoreAdj: 0
# No NodePorts on 127.0.0.1: they would change the host's route_localnet and firewall.
iptables:
  localhostNodePorts: false
# Leave the host's conntrack settings alone (the sandbox may not allow them).
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
{{end}}

{{define "audit-policy.yaml"}}apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
# Who was refused what: every request of a service account, without bodies.
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
{{end}}
`))

// layout is what the configuration files say about the cluster.
type layout struct {
	Dir, ContainerdSocket, CNIBinDir, PauseImage   string
	Bridge, HostIP, PodCIDR, NodeName              string
	KubeletPort, ProxyHealthPort, ProxyMetricsPort int
}

// writeConfigs renders each configuration file into its place under l.Dir.
func writeConfigs(l layout) error {
	for name, path := range map[string]string{
		"containerd.toml":    "containerd.toml",
		"10-bridge.conflist": "cni/net.d/10-bridge.conflist",
		"kubelet.yaml":       "kubelet.yaml",
		"kube-proxy.yaml":    "kube-proxy.yaml",
		"audit-policy.yaml":  "audit-policy.yaml",
	} {
		var b bytes.Buffer
		if err := configs.ExecuteTemplate(&b, name, l); err != nil {
			return fmt.Errorf("rendering %s: %w", name, err)
		}
		path = filepath.Join(l.Dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("creating the directory of %s: %w", name, err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
