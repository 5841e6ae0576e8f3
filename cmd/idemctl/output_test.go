package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// brokenPipe is a standard output whose reader has gone away.
type brokenPipe struct{}

func (brokenPipe) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestOutputLost: a command whose output cannot be written fails with exit code 1 and
// says why, in text as in JSON, so a script reading its output never takes a lost answer
// for an empty one.
func TestOutputLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claim(t, "order-1", "0123456789abcdef0123456789abcdef", e.now.Add(-time.Minute), "")
	e.claim(t, "order-2", "fedcba9876543210fedcba9876543210", e.now.Add(time.Minute), "")
	key := func(raw string) []string {
		return []string{"--scope", testScope, "--operation", testOperation, "--key", raw}
	}
	tests := []struct {
		name string
		args []string
	}{
		{name: "show", args: append([]string{"show"}, key("order-1")...)},
		{name: "show json", args: append([]string{"show", "--json"}, key("order-1")...)},
		{name: "find", args: []string{"find", "--key", "order-1"}},
		{name: "find json", args: []string{"find", "--json", "--key", "order-1"}},
		{name: "list", args: []string{"list"}},
		{name: "list json", args: []string{"list", "--json"}},
		{name: "release", args: append([]string{"release", "--yes"}, key("order-2")...)},
		{name: "help", args: []string{"help"}},
		{name: "command help", args: []string{"show", "-h"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.runTo(t, e.client, nil, false, brokenPipe{}, tc.args...)
			assert.Equal(t, exitFailed, got.code, "stderr: %s", got.stderr)
			assert.Contains(t, got.stderr, "broken pipe")
		})
	}
}
