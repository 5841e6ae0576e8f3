package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/jsonlines"
	"github.com/idemkit/idem/internal/proctest"
)

const pkg = "github.com/idemkit/idem/cmd/example-sqs"

// TestLocalModeProcess builds the binary and runs it outside Lambda against DynamoDB
// Local, with the event on stdin and then as a file argument: the second run is a
// redelivery of the whole batch and credits nothing.
func TestLocalModeProcess(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	idemTable, ledgerTable := ledgerTables(t, client)
	bin := proctest.Build(t, pkg)
	env := proctest.Env(endpoint, "IDEMPOTENCY_TABLE="+idemTable, "LEDGER_TABLE="+ledgerTable)
	fixture := filepath.Join("testdata", "sqs-credits-with-duplicates.json")
	event, err := os.ReadFile(fixture)
	require.NoError(t, err)
	golden, err := os.ReadFile(filepath.Join("testdata", "sqs-credits-with-duplicates.golden.json"))
	require.NoError(t, err)

	tests := []struct {
		name  string
		stdin []byte
		args  []string
	}{
		{name: "stdin", stdin: event},
		{name: "file argument", args: []string{fixture}},
		{name: "dash for stdin", stdin: event, args: []string{"-"}},
	}
	for _, tc := range tests {
		stdout, stderr, code := proctest.Run(t, bin, env, tc.stdin, tc.args...)
		require.Equal(t, 0, code, "%s: %s", tc.name, stderr)
		assert.JSONEq(t, string(golden), stdout, tc.name)
		// Standard error holds JSON lines only: log lines with the run's request ID (and no
		// SDK checksum warning), and one metrics document.
		var logs, docs int
		for _, l := range jsonlines.Parse(t, []byte(stderr)) {
			if _, ok := l["_aws"]; ok {
				docs++
				continue
			}
			logs++
			assert.NotEmpty(t, l["requestId"], "%s: %v", tc.name, l)
			assert.NotContains(t, l["message"], "checksum", tc.name)
		}
		assert.Equal(t, 1, docs, "%s: one metrics document", tc.name)
		assert.Equal(t, 2, logs, "%s: the failed message and the batch summary:\n%s", tc.name, stderr)
	}
	assert.Equal(t, map[string]int64{"acct-1": 1000, "acct-2": 250}, balances(t, client, ledgerTable))
}

func TestLocalModeErrorsProcess(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, pkg)
	tables := []string{"IDEMPOTENCY_TABLE=i", "LEDGER_TABLE=l"}
	tests := []struct {
		name   string
		env    []string
		stdin  string
		args   []string
		stderr string
	}{
		{name: "no tables", env: proctest.Env("http://127.0.0.1:1"),
			stderr: "example-sqs: missing environment variable(s): IDEMPOTENCY_TABLE, LEDGER_TABLE\n"},
		{name: "no ledger table", env: proctest.Env("http://127.0.0.1:1", "IDEMPOTENCY_TABLE=i"),
			stderr: "example-sqs: missing environment variable(s): LEDGER_TABLE\n"},
		{name: "not an event", env: proctest.Env("http://127.0.0.1:1", tables...), stdin: "{",
			stderr: "example-sqs: read SQS event: unexpected EOF\n"},
		{name: "two arguments", env: proctest.Env("http://127.0.0.1:1", tables...), args: []string{"a", "b"},
			stderr: "example-sqs: usage: example-sqs [event.json]\n"},
		{name: "missing file", env: proctest.Env("http://127.0.0.1:1", tables...), args: []string{"/nonexistent.json"},
			stderr: "example-sqs: open /nonexistent.json: no such file or directory\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := proctest.Run(t, bin, tc.env, []byte(tc.stdin), tc.args...)
			assert.Equal(t, 1, code)
			assert.Empty(t, strings.TrimSpace(stdout))
			assert.Equal(t, tc.stderr, stderr)
		})
	}
}
