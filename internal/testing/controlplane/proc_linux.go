//go:build linux

package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// childSysProcAttr puts a child in its own process group, so that a terminal's Ctrl-C
// reaches only this process, which then stops the child in order; and has the kernel kill
// the child if this process dies without stopping it (strictly: if the OS thread that
// started it exits, which the Go runtime does not do to threads it has not locked).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalAPIServer sends SIGSTOP (pause) or SIGCONT to the kube-apiserver serving from
// certDir.
func signalAPIServer(certDir string, pause bool) error {
	pid, err := findAPIServer(certDir)
	if err != nil {
		return err
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("sending %v to %s (pid %d): %w", sig, apiServerBinary, pid, err)
	}
	return nil
}

// findAPIServer returns the PID of the kube-apiserver whose command line contains
// --cert-dir=certDir. envtest does not expose it, but certDir is this control plane's own
// temporary directory, so exactly one live kube-apiserver names it.
func findAPIServer(certDir string) (int, error) {
	want := []byte("--cert-dir=" + certDir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("looking for %s: %w", apiServerBinary, err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // exited meanwhile, or not ours to read
		}
		args := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
		if filepath.Base(string(args[0])) != apiServerBinary {
			continue
		}
		for _, arg := range args[1:] {
			if bytes.Equal(arg, want) {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no running %s with --cert-dir=%s", apiServerBinary, certDir)
}
