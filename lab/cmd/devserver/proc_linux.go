package main

import "syscall"

// sysProcAttr puts the API in its own process group, so Ctrl-C reaches devserver alone and
// devserver stops the API in order, and makes the kernel stop the API if devserver dies
// without doing so, so it never keeps the port.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
