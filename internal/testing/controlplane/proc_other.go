//go:build !linux

package controlplane

import (
	"errors"
	"fmt"
	"syscall"
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
