package ddblocal

import "syscall"

// sysProcAttr makes the kernel kill the JVM when the test binary dies without cleaning up
// (a test timeout panics past TestMain's deferred stop).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
