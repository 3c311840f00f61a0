//go:build !linux

package kwok

import "syscall"

// childSysProcAttr is nothing: kwok outlives a test process that dies without ending it.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
