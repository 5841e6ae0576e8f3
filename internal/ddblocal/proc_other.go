//go:build !linux

package ddblocal

import "syscall"

// sysProcAttr returns nil: only Linux can tie the JVM's life to the test binary's.
func sysProcAttr() *syscall.SysProcAttr { return nil }
