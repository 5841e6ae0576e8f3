package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/proctest"
)

const pkg = "github.com/idemkit/idem/cmd/idemctl"

// TestProcess builds idemctl and runs it as an operator would, against DynamoDB Local
// through AWS_ENDPOINT_URL_DYNAMODB or --endpoint: exit codes, and the messages on bad
// input.
func TestProcess(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, pkg)
	e := newEnv(t)
	endpoint := ddblocal.Endpoint(t)
	e.complete(t, "order-1", map[string]string{"id": "o-1"})
	e.claim(t, "stuck", deadToken, time.Now().Add(-time.Minute), "")
	stuck := e.key(t, "stuck")

	env := proctest.Env(endpoint, "IDEMPOTENCY_TABLE="+e.table)
	var noEndpoint []string // region and credentials, no endpoint variable
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL_DYNAMODB=") && !strings.HasPrefix(kv, "IDEMPOTENCY_TABLE=") {
			noEndpoint = append(noEndpoint, kv)
		}
	}
	tests := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string // a substring; "" checks nothing
		stderr string
	}{
		{name: "no command", env: env, code: exitUsage, stderr: "Usage:"},
		{name: "help", env: env, args: []string{"help"}, code: exitOK, stdout: "Exit codes:"},
		{name: "command help", env: env, args: []string{"show", "-h"}, code: exitOK, stdout: "Usage:"},
		{name: "unknown command", env: env, args: []string{"purge"}, code: exitUsage,
			stderr: `idemctl: usage: unknown command "purge" (show, find, list, release, delete, outbox, help)`},
		{name: "unknown flag", env: env, args: []string{"show", "--kee", "x"}, code: exitUsage,
			stderr: "flag provided but not defined: -kee"},
		{name: "stray argument", env: env, args: []string{"show", "--scope", testScope, "order-1"}, code: exitUsage,
			stderr: `unexpected argument "order-1"`},
		{name: "no key", env: env, args: []string{"show", "--scope", testScope}, code: exitUsage,
			stderr: "name the record with --key (and --scope, --operation) or with --stored-key"},
		{name: "no scope", env: env, args: []string{"show", "--operation", testOperation, "--key", "order-1"}, code: exitUsage,
			stderr: "--scope is required with --key"},
		{name: "key and stored key", env: env, args: []string{"show", "--key", "k", "--stored-key", stuck}, code: exitUsage,
			stderr: "--stored-key names the record by itself"},
		{name: "not a stored key", env: env, args: []string{"show", "--stored-key", "order-1"}, code: exitUsage,
			stderr: `--stored-key "order-1" is not a stored key`},
		{name: "key too long", env: env, args: []string{"show", "--scope", testScope, "--operation", testOperation, "--key", strings.Repeat("k", 1025)}, code: exitUsage,
			stderr: "--key: idem: invalid idempotency key: longer than 1024 bytes"},
		{name: "no operation", env: env, args: []string{"show", "--scope", testScope, "--key", "order-1"}, code: exitUsage,
			stderr: "--operation is required with --key: the operation name given to idem.New"},
		{name: "bad operation", env: env, args: []string{"show", "--scope", testScope, "--operation", "a#b", "--key", "order-1"}, code: exitUsage,
			stderr: `--scope or --operation: idem: invalid option: New: operation "a#b": printable ASCII without spaces, '#' or '.' only`},
		{name: "operation without scope", env: env, args: []string{"list", "--operation", testOperation}, code: exitUsage,
			stderr: "--operation needs --scope"},
		{name: "no table", env: noEndpoint, args: []string{"show", "--stored-key", stuck}, code: exitUsage,
			stderr: "name the table with --table, --store dynamodb://TABLE or IDEMPOTENCY_TABLE"},
		{name: "store and table", env: env, args: []string{"show", "--table", "a", "--store", "dynamodb://b", "--stored-key", stuck}, code: exitUsage,
			stderr: "give --store or --table, not both"},
		{name: "another store", env: env, args: []string{"show", "--store", "redis://localhost/0", "--stored-key", stuck}, code: exitUsage,
			stderr: `--store "redis://localhost/0": only dynamodb://TABLE is supported`},
		{name: "sort key alone", env: env, args: []string{"list", "--sort-key", "sk"}, code: exitUsage,
			stderr: "--sort-key and --partition go together"},
		{name: "bad state", env: env, args: []string{"list", "--state", "stuck"}, code: exitUsage,
			stderr: `--state "stuck": want in-progress, lease-ended or all`},
		{name: "bad limit", env: env, args: []string{"list", "--limit", "0"}, code: exitUsage,
			stderr: "--limit must be at least 1"},
		{name: "no region", env: []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "AWS_CONFIG_FILE=/nonexistent", "IDEMPOTENCY_TABLE=t"},
			args: []string{"show", "--stored-key", stuck}, code: exitFailed, stderr: "no AWS region: set AWS_REGION or a profile's region"},
		{name: "no such table", env: env, args: []string{"show", "--table", "missing", "--stored-key", stuck}, code: exitFailed,
			stderr: "read " + stuck + " from table missing: idem: store: get: "},
		{name: "show", env: env, args: []string{"show", "--scope", testScope, "--operation", testOperation, "--key", "order-1"}, code: exitOK,
			stdout: "status       COMPLETED"},
		{name: "show with --endpoint", env: noEndpoint, args: []string{"show", "--endpoint", endpoint, "--table", e.table, "--stored-key", stuck},
			code: exitOK, stdout: "lease ended, nobody retried"},
		{name: "no record", env: env, args: []string{"show", "--scope", testScope, "--operation", testOperation, "--key", "order-2"}, code: exitNotFound,
			stderr: "idemctl: not found: no record under " + e.key(t, "order-2") + " in table " + e.table},
		{name: "list", env: env, args: []string{"list"}, code: exitOK, stdout: "lease-ended  " + stuck},
		{name: "release from a pipe", env: env, args: []string{"release", "--stored-key", stuck}, code: exitUsage,
			stderr: "release changes the table: pass --yes, or run it on a terminal to confirm"},
		{name: "delete in progress", env: env, args: []string{"delete", "--yes", "--stored-key", stuck}, code: exitRefused,
			stderr: "idemctl: refused: the record is in progress"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := proctest.Run(t, bin, tc.env, nil, tc.args...)
			assert.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stdout, tc.stdout)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
}

// TestProcessRelease releases a stuck key with --yes and reads it back with --json.
func TestProcessRelease(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, pkg)
	e := newEnv(t)
	e.claim(t, "stuck", deadToken, time.Now().Add(time.Hour), "charged")
	env := proctest.Env(ddblocal.Endpoint(t), "IDEMPOTENCY_TABLE="+e.table)

	stdout, stderr, code := proctest.Run(t, bin, env, nil, "release", "--yes", "--token", "deadbeef", "--scope", testScope, "--operation", testOperation, "--key", "stuck")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, `Released: the next request with this key takes it over and resumes from checkpoint "charged".`)

	stdout, stderr, code = proctest.Run(t, bin, env, nil, "show", "--json", "--scope", testScope, "--operation", testOperation, "--key", "stuck")
	require.Equal(t, exitOK, code, stderr)
	var v view
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	assert.Equal(t, stateLeaseEnded, v.State)
	assert.Equal(t, "charged", v.Checkpoint)
}

// TestProcessTerminal runs release on a real terminal (through script(1)), answering the
// question: typed "no" refuses, typed "yes" releases.
func TestProcessTerminal(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) from util-linux is not installed: the terminal path is covered in process by TestChangeConditional")
	}
	bin := proctest.Build(t, pkg)
	e := newEnv(t)
	e.claim(t, "stuck", deadToken, time.Now().Add(time.Hour), "")
	env := proctest.Env(ddblocal.Endpoint(t), "IDEMPOTENCY_TABLE="+e.table)
	command := bin + " release --stored-key '" + e.key(t, "stuck") + "'"
	tests := []struct {
		name  string
		typed string
		code  int
		want  string
	}{
		{name: "no", typed: "no\n", code: exitRefused, want: "not confirmed; nothing was written"},
		{name: "yes", typed: "yes\n", code: exitOK, want: "Released: the next request with this key takes it over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// script runs the command on a new pseudo-terminal, copies our stdin to it and
			// returns its exit code.
			stdout, _, code := proctest.Run(t, script, env, []byte(tc.typed), "-qec", command, "/dev/null")
			assert.Equal(t, tc.code, code, stdout)
			assert.Contains(t, stdout, "Type yes to release this record: ")
			assert.Contains(t, stdout, tc.want)
		})
	}
	assert.Equal(t, stateLeaseEnded, newView(e.get(t, "stuck"), time.Now()).State)
}
