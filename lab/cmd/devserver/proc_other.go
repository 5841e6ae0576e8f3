//go:build !linux && !windows

package main

import "syscall"

// sysProcAttr puts the API in its own process group, so Ctrl-C reaches devserver alone and
// devserver stops the API in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
