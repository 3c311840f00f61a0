package kwok

import "syscall"

// childSysProcAttr makes kwok die with the test process.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
