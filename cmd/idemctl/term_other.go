//go:build !linux && !darwin

package main

import "os"

// isTerminal reports false: where idemctl cannot tell a terminal, a change needs --yes.
func isTerminal(*os.File) bool { return false }
