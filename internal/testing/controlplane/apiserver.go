package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

const (
	// readyPollInterval is how often a starting kube-apiserver is asked whether it is ready.
	readyPollInterval = 100 * time.Millisecond
	// readyRequestTimeout bounds each of those requests.
	readyRequestTimeout = 2 * time.Second
	// secondAPIServerName names the second kube-apiserver's output and directory.
	secondAPIServerName = apiServerBinary + "-2"
)

// KillAPIServer kills the kube-apiserver with SIGKILL, as a crash would, and waits until it is
// gone. etcd and its data, and the kube-controller-manager, keep running; the port is free
// until StartAPIServer. A paused kube-apiserver is killed too (it is no longer paused).
// Killing a killed kube-apiserver does nothing. Linux only; elsewhere it returns an error
// wrapping errors.ErrUnsupported.
func (c *ControlPlane) KillAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("control plane %q is stopped", c.Name)
	}
	if c.killed {
		return nil
	}
	if err := c.rememberAPIServerCommand(); err != nil {
		return err
	}
	if c.apiServer != nil {
		// Started again by StartAPIServer: this process is our own child.
		if err := c.apiServer.cmd.Process.Kill(); err != nil && !c.apiServer.exited() {
			return fmt.Errorf("control plane %q: killing %s: %w", c.Name, apiServerBinary, err)
		}
		<-c.apiServer.done
		c.apiServer = nil
	} else if err := killAPIServer(c.certDir, stopTimeout); err != nil {
		// The one envtest started: its goroutine reaps it.
		return fmt.Errorf("control plane %q: %w", c.Name, err)
	}
	c.killed, c.paused = true, false
	return nil
}

// StartAPIServer starts the kube-apiserver killed by KillAPIServer again with the very same
// command line: the same port, certificates and etcd, so that Config, Kubeconfig,
// KubeconfigPath and the users of AddUser work again. It returns once the kube-apiserver is
// ready (/readyz), or with an error when ctx is done first. Starting a kube-apiserver that
// was not killed does nothing.
func (c *ControlPlane) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("control plane %q is stopped", c.Name)
	}
	if !c.killed {
		c.mu.Unlock()
		return nil
	}
	p, err := startProcessEnv(c.apiServerCommand[0], c.apiServerCommand[1:], c.apiServerEnv, c.apiServerOut, c.apiServerErr)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("control plane %q: starting %s: %w", c.Name, apiServerBinary, err)
	}
	c.apiServer, c.killed = p, false
	c.mu.Unlock()

	// Not under the lock: Stop may run meanwhile, and then the wait ends with the process.
	if err := waitReady(ctx, c.Config, p.done); err != nil {
		return fmt.Errorf("control plane %q: waiting for the restarted %s: %w", c.Name, apiServerBinary, err)
	}
	return nil
}

// SecondAPIServer starts, on its first call, a second kube-apiserver on the control plane's
// etcd, on a port of its own, and returns an admin client config for it once it is ready: a
// way to change objects behind the back of the clients of the first one (while it is killed,
// say). Later calls return a copy of the same config. The second kube-apiserver is not
// affected by Pause, Resume, KillAPIServer or StartAPIServer; Stop stops it. Linux only, like
// KillAPIServer.
func (c *ControlPlane) SecondAPIServer(ctx context.Context) (*rest.Config, error) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, fmt.Errorf("control plane %q is stopped", c.Name)
	}
	if c.second != nil {
		defer c.mu.Unlock()
		return rest.CopyConfig(c.secondConfig), nil
	}
	cfg, p, err := c.startSecondAPIServer()
	if err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("control plane %q: starting a second %s: %w", c.Name, apiServerBinary, err)
	}
	c.second, c.secondConfig = p, cfg
	c.mu.Unlock()

	if err := waitReady(ctx, cfg, p.done); err != nil {
		return nil, fmt.Errorf("control plane %q: waiting for the second %s: %w", c.Name, apiServerBinary, err)
	}
	return rest.CopyConfig(cfg), nil
}

// startSecondAPIServer starts a copy of the kube-apiserver with a certificate directory of its
// own (a copy of the first one's) and a free port; c.mu is held.
func (c *ControlPlane) startSecondAPIServer() (*rest.Config, *process, error) {
	if err := c.rememberAPIServerCommand(); err != nil {
		return nil, nil, err
	}
	certDir := filepath.Join(c.dir, secondAPIServerName)
	if err := os.CopyFS(certDir, os.DirFS(c.certDir)); err != nil {
		return nil, nil, fmt.Errorf("copying the certificates: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, nil, err
	}
	args := secondAPIServerArgs(c.apiServerCommand[1:], c.certDir, certDir, port)
	stdout, stderr := c.streams(c.out, secondAPIServerName)
	p, err := startProcess(c.apiServerCommand[0], args, stdout, stderr)
	if err != nil {
		return nil, nil, err
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return cfg, p, nil
}

// secondAPIServerArgs derives the second kube-apiserver's flags from the first one's: every
// path under certDir moves to secondCertDir, the secure port becomes port, and the second
// does not take part in the endpoints of the kubernetes Service (both serve 127.0.0.1).
func secondAPIServerArgs(args []string, certDir, secondCertDir string, port int) []string {
	out := make([]string, 0, len(args)+1)
	for _, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--secure-port="):
			arg = "--secure-port=" + strconv.Itoa(port)
		case strings.HasPrefix(arg, "--endpoint-reconciler-type="):
			continue
		case strings.Contains(arg, "="+certDir):
			arg = strings.Replace(arg, "="+certDir, "="+secondCertDir, 1)
		}
		out = append(out, arg)
	}
	return append(out, "--endpoint-reconciler-type=none")
}

// rememberAPIServerCommand records the running kube-apiserver's command line, once, while it
// runs; c.mu is held.
func (c *ControlPlane) rememberAPIServerCommand() error {
	if c.apiServerCommand != nil {
		return nil
	}
	args, err := apiServerCommandLine(c.certDir)
	if err != nil {
		return fmt.Errorf("control plane %q: %w", c.Name, err)
	}
	c.apiServerCommand = args
	return nil
}

// waitReady polls the kube-apiserver of cfg until its /readyz answers 200, ctx is done, or
// exited is closed.
func waitReady(ctx context.Context, cfg *rest.Config, exited <-chan struct{}) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	httpClient.Timeout = readyRequestTimeout
	ticker := time.NewTicker(readyPollInterval)
	defer ticker.Stop()
	var last error
	for {
		if last = ready(ctx, httpClient, cfg.Host); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		case <-exited:
			return errors.New("process exited")
		case <-ticker.C:
		}
	}
}

func ready(ctx context.Context, httpClient *http.Client, host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return err
	}
	u.Path = "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
