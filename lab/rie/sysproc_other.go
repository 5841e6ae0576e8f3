//go:build !linux

package rie

import "syscall"

// sysProcAttr is empty: the emulator runs only on Linux, where the test's death stops it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
