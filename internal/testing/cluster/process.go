package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is a component of the cluster: a child process that dies with this one (on Linux),
// its output in a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
}

// start starts binary with args, its stdout and stderr in logDir/name.log.
func start(logDir, name, binary string, args ...string) (*process, error) {
	path := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: path, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited, with the tail of its log if it has.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%s); the end of its log:\n%s", p.name, p.cmd.ProcessState, tail(p.log, 20))
	default:
		return nil
	}
}

// stop sends SIGTERM and, if the process has not exited after timeout, SIGKILL.
func (p *process) stop(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
