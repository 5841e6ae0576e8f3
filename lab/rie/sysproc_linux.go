package rie

import "syscall"

// sysProcAttr has the emulator sent SIGTERM, on which it stops the function and exits,
// should the test's process die without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
