//go:build !linux

package controlplane

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// childSysProcAttr leaves the child in this process's group; without Linux's Pdeathsig a
// crashed parent leaks it.
func childSysProcAttr() *syscall.SysProcAttr {
	return nil
}

// signalAPIServer is implemented on Linux only, where /proc finds the kube-apiserver.
func signalAPIServer(string, bool) error {
	return fmt.Errorf("pausing and resuming the kube-apiserver: %w", errors.ErrUnsupported)
}

// apiServerCommandLine is implemented on Linux only, like signalAPIServer.
func apiServerCommandLine(string) ([]string, error) {
	return nil, fmt.Errorf("reading the kube-apiserver's command line: %w", errors.ErrUnsupported)
}

// killAPIServer is implemented on Linux only, like signalAPIServer.
func killAPIServer(string, time.Duration) error {
	return fmt.Errorf("killing the kube-apiserver: %w", errors.ErrUnsupported)
}

// findAPIServerPID is implemented on Linux only, like signalAPIServer.
func findAPIServerPID(string) (int, error) {
	return 0, fmt.Errorf("finding the kube-apiserver: %w", errors.ErrUnsupported)
}
