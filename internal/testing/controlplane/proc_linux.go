//go:build linux

package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// reapPollInterval is how often killAPIServer checks whether the killed process is gone.
const reapPollInterval = 10 * time.Millisecond

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
	if pause {
		return waitStopped(pid)
	}
	return nil
}

// pauseTimeout bounds how long waitStopped waits for every thread to stop.
const pauseTimeout = 5 * time.Second

// waitStopped returns once every thread of pid is stopped: kill returns once SIGSTOP is sent,
// and a thread running on another core may still answer a request until it takes the signal.
func waitStopped(pid int) error {
	deadline := time.Now().Add(pauseTimeout)
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) not stopped %v after SIGSTOP", apiServerBinary, pid, pauseTimeout)
		}
		time.Sleep(reapPollInterval)
	}
}

// allThreadsStopped reports whether every thread of pid is in the stopped state (T).
func allThreadsStopped(pid int) (bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("reading the threads of %s (pid %d): %w", apiServerBinary, pid, err)
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		// "tid (comm) state ...": comm may hold spaces and parentheses, the state follows the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false, nil
		}
	}
	return true, nil
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

// apiServerCommandLine returns the command line, binary first, of the kube-apiserver serving
// from certDir.
func apiServerCommandLine(certDir string) ([]string, error) {
	pid, err := findAPIServer(certDir)
	if err != nil {
		return nil, err
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, fmt.Errorf("reading the command line of %s (pid %d): %w", apiServerBinary, pid, err)
	}
	var args []string
	for _, arg := range bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0}) {
		args = append(args, string(arg))
	}
	return args, nil
}

// killAPIServer sends SIGKILL to the kube-apiserver serving from certDir, a child of this
// process that another goroutine waits for (envtest's), and waits up to timeout until it has
// been reaped.
func killAPIServer(certDir string, timeout time.Duration) error {
	pid, err := findAPIServer(certDir)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s (pid %d): %w", apiServerBinary, pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		// A zombie still takes signal 0; a reaped process does not.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) not reaped within %s of SIGKILL", apiServerBinary, pid, timeout)
		}
		time.Sleep(reapPollInterval)
	}
}

// findAPIServerPID returns the PID of the kube-apiserver serving from certDir.
func findAPIServerPID(certDir string) (int, error) {
	return findAPIServer(certDir)
}
