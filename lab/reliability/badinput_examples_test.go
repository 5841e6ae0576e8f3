package reliability_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/samtables"
)

// TestBadInputExampleSQS runs the example-sqs binary on DynamoDB Local with hostile events
// on stdin: an unusable event makes it exit non-zero, a bad message is reported failed,
// and no bad message ever credits an account.
func TestBadInputExampleSQS(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	names := samtables.NewTables(t, client, "IdempotencyTable", "LedgerTable")
	bin := proctest.Build(t, "github.com/idemkit/idem/cmd/example-sqs")
	env := proctest.Env(endpoint, "IDEMPOTENCY_TABLE="+names["IdempotencyTable"], "LEDGER_TABLE="+names["LedgerTable"])

	event := func(bodies ...string) string {
		e := events.SQSEvent{}
		for i, b := range bodies {
			e.Records = append(e.Records, events.SQSMessage{MessageId: "bad-" + string(rune('a'+i)), Body: b,
				EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:ledger"})
		}
		out, err := json.Marshal(e)
		require.NoError(t, err)
		return string(out)
	}
	tests := []struct {
		name     string
		stdin    string
		wantExit bool     // the event is unusable: non-zero exit
		failed   []string // message IDs reported failed
	}{
		{name: "empty stdin", stdin: "", wantExit: true},
		{name: "truncated event", stdin: `{"Records":[{"messageId":"x","body":"{}"`, wantExit: true},
		{name: "event of the wrong type", stdin: `[1,2,3]`, wantExit: true},
		{name: "truncated body", stdin: event(`{"account_id":"acct-bad","amount_cents":`), failed: []string{"bad-a"}},
		{name: "amount a string", stdin: event(`{"account_id":"acct-bad","amount_cents":"100"}`), failed: []string{"bad-a"}},
		{name: "account missing", stdin: event(`{"amount_cents":100}`), failed: []string{"bad-a"}},
		{name: "NUL and invalid UTF-8 body", stdin: event("\x00\xff"), failed: []string{"bad-a"}},
		{name: "huge body", stdin: event(`{"account_id":"` + strings.Repeat("a", 1<<20) + `","amount_cents":1}`), failed: []string{"bad-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := proctest.Run(t, bin, env, []byte(tc.stdin))
			if tc.wantExit {
				assert.NotZero(t, code, "stdout %q", stdout)
				assert.NotEmpty(t, stderr, "a clear error")
				return
			}
			require.Zero(t, code, stderr)
			var resp events.SQSEventResponse
			require.NoError(t, json.Unmarshal([]byte(stdout), &resp), stdout)
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			assert.Equal(t, tc.failed, failed)
			assert.Zero(t, ledgerBalance(t, client, names["LedgerTable"], "acct-bad"), "nothing credited")
		})
	}
}

// ledgerBalance reads an account's balance_cents from the example's ledger table, 0 when
// absent.
func ledgerBalance(t *testing.T, client *dynamodb.Client, table, account string) int {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"account_id": &types.AttributeValueMemberS{Value: account}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	n, ok := out.Item["balance_cents"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	require.NoError(t, err)
	return v
}
