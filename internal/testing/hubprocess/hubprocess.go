// Package hubprocess runs the hub binary as a child process, the way the embedded demo, the
// end-to-end tests and the benchmark run it: against a hub cluster's kubeconfig, with its
// metrics and health endpoints on free loopback ports, its log in a file.
package hubprocess

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Build compiles the hub binary (the module's ./hub) into dir and returns its path: what tests
// run, so that they test the binary a user runs. Extra go build flags (such as -race) come
// after dir.
func Build(dir string, flags ...string) (string, error) {
	bin := filepath.Join(dir, "hub")
	args := append(append([]string{"build"}, flags...), "-o", bin, "configbundle.dev/hub/hub")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the hub: %w\n%s", err, out)
	}
	return bin, nil
}

// runCommands caches runCommand's answer per binary.
var runCommands sync.Map

// runCommand returns the command that runs the hub in binary: run, or nothing for a binary
// built before hub run existed (which ran the hub without a command), such as an earlier
// release's that an upgrade test starts.
func runCommand(binary string) []string {
	if known, ok := runCommands.Load(binary); ok {
		return known.([]string)
	}
	// An older binary answers "run --help" with its own help, exit 0: read the usage line.
	cmd := []string{"run"}
	if out, err := exec.Command(binary, "run", "--help").Output(); err != nil || !strings.Contains(string(out), "hub run [flags]") {
		cmd = nil
	}
	runCommands.Store(binary, cmd)
	return cmd
}

// Options configure Start.
type Options struct {
	// Binary is the hub binary. Required.
	Binary string
	// Kubeconfig is the hub cluster's kubeconfig file. Required.
	Kubeconfig string
	// LogPath receives the hub's output (appended). Required.
	LogPath string
	// Args are further flags, for example --probe-interval=1s.
	Args []string
	// ReadyTimeout bounds the wait for /readyz. Defaults to 1 minute.
	ReadyTimeout time.Duration
}

// Process is a running hub.
type Process struct {
	// MetricsAddr and HealthAddr are the loopback addresses of its endpoints, both plain HTTP
	// (--metrics-secure=false).
	MetricsAddr, HealthAddr string
	// LogPath is its log file.
	LogPath string

	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts the hub (hub run) and waits until it reports ready. If the hub exits first, the error
// carries the end of its log.
func Start(ctx context.Context, opts Options) (*Process, error) {
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = time.Minute
	}
	log, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	p := &Process{MetricsAddr: FreeAddr(), HealthAddr: FreeAddr(), LogPath: opts.LogPath, exited: make(chan struct{})}
	args := append(runCommand(opts.Binary), "--kubeconfig="+opts.Kubeconfig,
		"--metrics-bind-address="+p.MetricsAddr, "--metrics-secure=false", "--health-probe-bind-address="+p.HealthAddr)
	args = append(args, opts.Args...)
	p.cmd = exec.Command(opts.Binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// The hub dies with whoever started it, even if that one crashes.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the hub: %w", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, opts.ReadyTimeout, true, func(context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("the hub exited at start; its log ends with:\n%s", p.LogTail(4096))
		default:
		}
		resp, err := http.Get("http://" + p.HealthAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.Stop(syscall.SIGKILL)
		return nil, err
	}
	return p, nil
}

// Stop sends sig (SIGTERM to stop, SIGKILL to crash) and waits until the hub has exited.
func (p *Process) Stop(sig syscall.Signal) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.exited
}

// Exited reports whether the hub has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// ExitCode is the hub's exit code once it has exited; -1 while it runs, or if a signal ended it.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Pid is the hub's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogTail returns the last n bytes of the hub's log.
func (p *Process) LogTail(n int) string {
	data, _ := os.ReadFile(p.LogPath)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// FreeAddr returns a free loopback address.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}
