package main

import "syscall"

// sysProcAttr has no process groups to set on Windows; Ctrl-C reaches the API too.
func sysProcAttr() *syscall.SysProcAttr { return nil }
