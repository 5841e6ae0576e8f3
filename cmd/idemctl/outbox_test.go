package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/internal/proctest"
)

// runOutbox runs idemctl in-process with args, finding idemctl-pg at tool ("" for
// nowhere), with IDEMPOTENCY_TABLE set to "orders".
func runOutbox(t *testing.T, tool string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(name string) string {
			if name == "IDEMPOTENCY_TABLE" {
				return "orders"
			}
			return ""
		},
		now:   time.Now,
		isTTY: func() bool { return false },
		connect: func(context.Context, string) (API, error) {
			return nil, errors.New("outbox lag must not connect to DynamoDB")
		},
		findTool: func(name string) (string, error) {
			if tool == "" || name != pgTool {
				return "", exec.ErrNotFound
			}
			return tool, nil
		},
	}
	code = a.run(context.Background(), args)
	return out.String(), errOut.String(), code
}

// fakeTool writes a script that prints its arguments, complains on stderr and exits 3.
func fakeTool(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), pgTool)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho \"$@\"\necho 'idemctl-pg: complaint' >&2\nexit 3\n"), 0o755))
	return p
}

// TestOutboxLag: a PostgreSQL store runs idemctl-pg with idemctl's arguments, its output
// and exit code idemctl's; without idemctl-pg it says how to build it; a DynamoDB store
// is explained (IteratorAge, the relay's hook), never read.
func TestOutboxLag(t *testing.T) {
	t.Parallel()
	tool := fakeTool(t)
	tests := []struct {
		name   string
		tool   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{name: "postgres", tool: tool, args: []string{"outbox", "lag", "--store", "postgres://ops@db/app", "--table", "pay", "--json"},
			code: 3, stdout: "outbox lag --store postgres://ops@db/app --table pay --json\n", stderr: []string{"idemctl-pg: complaint"}},
		{name: "postgresql scheme", tool: tool, args: []string{"outbox", "lag", "--store=postgresql://ops@db/app"},
			code: 3, stdout: "outbox lag --store=postgresql://ops@db/app\n"},
		{name: "no idemctl-pg", args: []string{"outbox", "lag", "--store", "postgres://ops@db/app"},
			code: exitFailed, stderr: []string{"idemctl-pg not found", "go build -o DIR ./cmd/idemctl-pg"}},
		{name: "dynamodb", tool: tool, args: []string{"outbox", "lag", "--table", "orders"},
			code: exitUsage, stderr: []string{"a DynamoDB outbox has no backlog idemctl can read", "IteratorAge", "lag hook"}},
		{name: "dynamodb from the environment", tool: tool, args: []string{"outbox", "lag"},
			code: exitUsage, stderr: []string{"IteratorAge"}},
		{name: "not lag", tool: tool, args: []string{"outbox", "purge"}, code: exitUsage, stderr: []string{"want outbox lag"}},
		{name: "bad flag", tool: tool, args: []string{"outbox", "lag", "--limit", "3"}, code: exitUsage,
			stderr: []string{"flag provided but not defined"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runOutbox(t, tc.tool, tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Equal(t, tc.stdout, stdout)
			for _, s := range tc.stderr {
				assert.Contains(t, stderr, s)
			}
		})
	}
}

// TestOutboxLagRunsIdemctlPG builds the real idemctl-pg (pgstore module) and runs it
// through idemctl against a real PostgreSQL server without the outbox table: idemctl-pg's
// error and exit code 1 come through. (pgstore/cmd/idemctl-pg's own tests read real
// outboxes; this module cannot create one without pgx.)
func TestOutboxLagRunsIdemctlPG(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgserver.Start(ctx)
	if err != nil {
		proctest.Unavailable(t, "IDEM_REQUIRE_POSTGRES", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	bin := filepath.Join(t.TempDir(), pgTool)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/idemctl-pg")
	build.Dir = filepath.Join("..", "..", "pgstore")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	stdout, stderr, code := runOutbox(t, bin, "outbox", "lag", "--store", srv.URL(), "--table", "missing")
	assert.Equal(t, exitFailed, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "idemctl-pg: outbox missing_outbox:")
	assert.Contains(t, stderr, "does not exist")
}
