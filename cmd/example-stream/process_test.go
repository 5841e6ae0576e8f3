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
	"github.com/idemkit/idem/internal/samtables"
)

const pkg = "github.com/idemkit/idem/cmd/example-stream"

// TestLocalModeProcess builds the binary and runs it outside Lambda against DynamoDB
// Local, with the fixture on stdin and then as a file argument: it reports the invalid
// record, counts each new order once (the second run replays), and writes one metrics
// document of DynamoDBStreams* batch metrics, with no order's key or image in any line.
// Without its tables' names, it stops with an error naming them.
func TestLocalModeProcess(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	tables := samtables.NewTables(t, client, "IdempotencyTable", "LedgerTable")
	bin := proctest.Build(t, pkg)
	env := proctest.Env(endpoint, "IDEMPOTENCY_TABLE="+tables["IdempotencyTable"], "LEDGER_TABLE="+tables["LedgerTable"])
	fixture := filepath.Join("testdata", "dynamodb-orders-new.json")
	event, err := os.ReadFile(fixture)
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		stdin []byte
		args  []string
	}{
		{name: "stdin", stdin: event},
		{name: "file argument", args: []string{fixture}},
	} {
		stdout, stderr, code := proctest.Run(t, bin, env, tc.stdin, tc.args...)
		require.Equal(t, 0, code, "%s: %s", tc.name, stderr)
		assert.JSONEq(t, `{"batchItemFailures":[{"itemIdentifier":"`+invalidSequenceNumber+`"}]}`, stdout, tc.name)
		var docs int
		for _, l := range jsonlines.Parse(t, []byte(stderr)) {
			if _, ok := l["_aws"]; ok {
				docs++
				assert.Contains(t, l, "DynamoDBStreamsRecords", tc.name)
				assert.Contains(t, l, "DynamoDBStreamsFailedHandler", tc.name)
				continue
			}
			assert.NotEmpty(t, l["requestId"], "%s: %v", tc.name, l)
		}
		assert.Equal(t, 1, docs, "%s: one metrics document", tc.name)
		for _, secret := range []string{"sku-", `"o-`} {
			assert.False(t, strings.Contains(stderr, secret), "%s: %q in the logs:\n%s", tc.name, secret, stderr)
		}
	}
	assert.Equal(t, map[string]int64{"sales#sku-1": 800, "sales#sku-2": 700}, balances(t, client, tables["LedgerTable"]))

	// Without its tables' names, it stops with an error naming them.
	_, stderr, code := proctest.Run(t, bin, proctest.Env(endpoint), nil)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "IDEMPOTENCY_TABLE")
}
