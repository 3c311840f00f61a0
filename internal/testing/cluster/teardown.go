package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stop tears the cluster down and removes its directory: the kubelet first (so that it starts
// nothing more), then every pod through the CRI (CNI releases its network), kube-proxy and its
// iptables rules, the control plane, containerd and its shims, and what is left on the host:
// mounts under the directory, the pods' cgroups and the bridge. It returns every failure.
func (c *Cluster) Stop() error {
	var errs []error
	if p := c.process("kubelet"); p != nil {
		errs = append(errs, p.stop(stopTimeout))
	}
	if c.process("containerd") != nil {
		errs = append(errs, c.removePods())
	}
	if p := c.process("kube-proxy"); p != nil {
		errs = append(errs, p.stop(stopTimeout))
		if out, err := exec.Command(c.bin("kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, out))
		}
	}
	removeKubeletChains()
	for _, p := range slices.Backward(c.processes) {
		errs = append(errs, p.stop(stopTimeout))
	}
	errs = append(errs, killShims(c.socket), unmountUnder(c.dir), removePodCgroups())
	if _, err := os.Stat("/sys/class/net/" + Bridge); err == nil {
		errs = append(errs, deleteBridge())
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the cluster's directory: %w", err))
	}
	return errors.Join(errs...)
}

func (c *Cluster) process(name string) *process {
	for _, p := range c.processes {
		if p.name == name {
			return p
		}
	}
	return nil
}

// removePods stops and removes every pod sandbox through containerd's CRI, as the kubelet
// would: their containers are killed and CNI releases their networks.
func (c *Cluster) removePods() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+c.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connecting to containerd's CRI: %w", err)
	}
	defer func() { _ = conn.Close() }()
	cri := runtimeapi.NewRuntimeServiceClient(conn)
	sandboxes, err := cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, s := range sandboxes.Items {
		if _, err := cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping the sandbox of %s: %w", s.Metadata.GetName(), err))
			continue
		}
		if _, err := cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing the sandbox of %s: %w", s.Metadata.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims of the containerd at socket, and their containers: a
// shim outlives its containerd.
func killShims(socket string) error {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, socket) {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // its process group: the shim and its containers
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// unmountUnder lazily unmounts everything mounted under dir, deepest first: the snapshots,
// the pods' volumes and network namespaces containerd and the kubelet mounted.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mounts: %w", err)
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	var errs []error
	for _, m := range slices.Backward(mounts) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removePodCgroups removes the kubelet's cgroups (kubepods, with the cgroupfs driver) from
// every v1 hierarchy, deepest first, killing what still runs in them (a container whose
// shim was killed).
func removePodCgroups() error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			killProcsOf(d)
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killProcsOf kills the processes of a cgroup and waits a moment for them to leave it.
func killProcsOf(cgroup string) {
	procs, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
	if err != nil || len(strings.TrimSpace(string(procs))) == 0 {
		return
	}
	for _, f := range strings.Fields(string(procs)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for range 50 {
		if procs, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs")); err != nil || len(strings.TrimSpace(string(procs))) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kubeletChains are the iptables chains the kubelet (and kube-proxy, outside --cleanup's
// reach) leave behind, by table, with the built-in chains that jump to them.
var kubeletChains = map[string]map[string][]string{
	"filter": {"KUBE-FIREWALL": {"INPUT", "OUTPUT"}, "KUBE-KUBELET-CANARY": nil, "KUBE-PROXY-CANARY": nil},
	"nat":    {"KUBE-KUBELET-CANARY": nil, "KUBE-PROXY-CANARY": nil},
	"mangle": {"KUBE-KUBELET-CANARY": nil, "KUBE-PROXY-CANARY": nil, "KUBE-IPTABLES-HINT": nil},
}

// removeKubeletChains deletes kubeletChains from iptables and ip6tables; a chain that is not
// there is no error.
func removeKubeletChains() {
	for _, iptables := range []string{"iptables", "ip6tables"} {
		for table, chains := range kubeletChains {
			for chain, from := range chains {
				for _, builtin := range from {
					_ = exec.Command(iptables, "-w", "-t", table, "-D", builtin, "-j", chain).Run()
				}
				_ = exec.Command(iptables, "-w", "-t", table, "-F", chain).Run()
				_ = exec.Command(iptables, "-w", "-t", table, "-X", chain).Run()
			}
		}
	}
}
