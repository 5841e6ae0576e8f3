package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/ledgertest"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/sqs"
)

var update = flag.Bool("update", false, "rewrite the *.golden.json files in testdata")

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// The fixture's invalid message: its amount is a string.
const invalidMessageID = "f0e1d2c3-b4a5-4968-8778-695a4b3c2d64"

// ledgerTables creates the example's tables on DynamoDB Local from infra/template.yaml.
func ledgerTables(t *testing.T, client *dynamodb.Client) (idemTable, ledgerTable string) {
	t.Helper()
	names := samtables.NewTables(t, client, "IdempotencyTable", "LedgerTable")
	return names["IdempotencyTable"], names["LedgerTable"]
}

// noMetrics returns a metrics recorder that writes nowhere.
func noMetrics(t *testing.T) *emf.Recorder {
	t.Helper()
	metrics, err := emf.New(io.Discard, "test")
	require.NoError(t, err)
	return metrics
}

// newTestHandler returns the example's handler on fresh tables, and the ledger table.
func newTestHandler(t *testing.T) (*sqs.Handler, *dynamodb.Client, string) {
	t.Helper()
	client := ddblocal.Client(t)
	idemTable, ledgerTable := ledgerTables(t, client)
	h, err := newHandler(client, idemTable, ledgerTable, slog.New(slog.DiscardHandler), noMetrics(t))
	require.NoError(t, err)
	return h, client, ledgerTable
}

// loadEvent reads an SQS event fixture from testdata.
func loadEvent(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev events.SQSEvent
	require.NoError(t, json.Unmarshal(data, &ev))
	return ev
}

// invoke runs a batch through the Lambda runtime's handler path (JSON in and out) with a
// deadline as Lambda gives, and returns the IDs of the failed messages, sorted.
func invoke(t *testing.T, h *sqs.Handler, ev events.SQSEvent) []string {
	t.Helper()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, payload)
	require.NoError(t, err)
	var resp events.SQSEventResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	slices.Sort(failed)
	return failed
}

// balances reads the balances of the ledger table, by account.
func balances(t *testing.T, client *dynamodb.Client, table string) map[string]int64 {
	t.Helper()
	return ledgertest.Balances(t, client, table, "account_id", "balance_cents")
}

// message returns an SQS message crediting amount to account, keyed by key if not empty.
func message(id, account string, amount int64, key string) events.SQSMessage {
	m := events.SQSMessage{
		MessageId:      id,
		Body:           fmt.Sprintf(`{"account_id":%q,"amount_cents":%d}`, account, amount),
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:ledger",
		AWSRegion:      "eu-west-1",
	}
	if key != "" {
		m.MessageAttributes = map[string]events.SQSMessageAttribute{
			sqs.KeyAttribute: {DataType: "String", StringValue: aws.String(key)},
		}
	}
	return m
}

func TestLedgerFixture(t *testing.T) {
	t.Parallel()
	h, client, ledgerTable := newTestHandler(t)
	ev := loadEvent(t, "sqs-credits-with-duplicates.json")

	// The first two messages were sent twice for one transfer (same Idempotency-Key): one
	// credit. The third is keyed by its message ID; the fourth is invalid and fails.
	assert.Equal(t, []string{invalidMessageID}, invoke(t, h, ev))
	want := map[string]int64{"acct-1": 1000, "acct-2": 250}
	assert.Equal(t, want, balances(t, client, ledgerTable))

	// SQS redelivers the batch (a timeout, a lost response): nothing is credited again,
	// and the invalid message still fails, for the DLQ to take after maxReceiveCount.
	for range 3 {
		assert.Equal(t, []string{invalidMessageID}, invoke(t, h, ev))
	}
	assert.Equal(t, want, balances(t, client, ledgerTable))
}

func TestLedgerGolden(t *testing.T) {
	t.Parallel()
	h, _, _ := newTestHandler(t)
	ev := loadEvent(t, "sqs-credits-with-duplicates.json")
	resp, err := h.Handle(context.Background(), ev)
	require.NoError(t, err)
	got, err := json.MarshalIndent(resp, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	golden := filepath.Join("testdata", "sqs-credits-with-duplicates.golden.json")
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
}

func TestLedgerExactlyOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		batches [][]events.SQSMessage
		want    map[string]int64
		failed  []string // failed message IDs, over all batches
	}{
		{
			name: "duplicates within a batch",
			batches: [][]events.SQSMessage{{
				message("m1", "a", 100, "t1"),
				message("m2", "a", 100, "t1"),
				message("m3", "a", 100, "t1"),
				message("m4", "b", 7, ""),
			}},
			want: map[string]int64{"a": 100, "b": 7},
		},
		{
			name: "redelivery in later batches",
			batches: [][]events.SQSMessage{
				{message("m1", "a", 100, ""), message("m2", "b", 5, "")},
				{message("m1", "a", 100, "")},
				{message("m2", "b", 5, ""), message("m1", "a", 100, ""), message("m3", "a", 1, "")},
			},
			want: map[string]int64{"a": 101, "b": 5},
		},
		{
			name: "key reused for another credit fails",
			batches: [][]events.SQSMessage{
				{message("m1", "a", 100, "t1")},
				{message("m2", "a", 999, "t1")},
			},
			want:   map[string]int64{"a": 100},
			failed: []string{"m2"},
		},
		{
			name: "invalid body fails and credits nothing",
			batches: [][]events.SQSMessage{{
				{MessageId: "m1", Body: `{"account_id":"a"}`, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:ledger"},
				message("m2", "b", 3, ""),
			}},
			want:   map[string]int64{"b": 3},
			failed: []string{"m1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, client, ledgerTable := newTestHandler(t)
			failed := []string{}
			for _, batch := range tc.batches {
				failed = append(failed, invoke(t, h, events.SQSEvent{Records: batch})...)
			}
			if tc.failed == nil {
				tc.failed = []string{}
			}
			assert.Equal(t, tc.failed, failed)
			assert.Equal(t, tc.want, balances(t, client, ledgerTable))
		})
	}
}

// TestLedgerConcurrentInvocations delivers the same messages to several concurrent
// invocations, as SQS may after a visibility timeout, each with its own handler as in
// separate containers. A message whose key is in flight elsewhere fails and is redelivered,
// as SQS would, until no message fails: every key is credited exactly once.
func TestLedgerConcurrentInvocations(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	idemTable, ledgerTable := ledgerTables(t, client)
	const containers, transfers = 6, 20
	handlers := make([]*sqs.Handler, containers)
	for i := range handlers {
		h, err := newHandler(client, idemTable, ledgerTable, slog.New(slog.DiscardHandler), noMetrics(t))
		require.NoError(t, err)
		handlers[i] = h
	}
	var batch []events.SQSMessage
	want := map[string]int64{}
	for i := range transfers {
		account := "acct-" + strconv.Itoa(i%4)
		amount := int64(100 + i)
		batch = append(batch, message("m"+strconv.Itoa(i), account, amount, "transfer-"+strconv.Itoa(i)))
		want[account] += amount
	}

	pending := batch
	for round := 0; len(pending) > 0; round++ {
		require.Less(t, round, 20, "messages still failing: %v", pending)
		var mu sync.Mutex
		failedIDs := map[string]bool{}
		var wg sync.WaitGroup
		for i, h := range handlers {
			// Each container gets the pending messages in another order, in batches of 10.
			msgs := slices.Clone(pending)
			slices.SortFunc(msgs, func(a, b events.SQSMessage) int {
				return bytes.Compare(rotate(a.MessageId, i), rotate(b.MessageId, i))
			})
			for start := 0; start < len(msgs); start += 10 {
				wg.Add(1)
				go func(records []events.SQSMessage) {
					defer wg.Done()
					for _, id := range invoke(t, h, events.SQSEvent{Records: records}) {
						mu.Lock()
						failedIDs[id] = true
						mu.Unlock()
					}
				}(msgs[start:min(start+10, len(msgs))])
			}
		}
		wg.Wait()
		t.Logf("round %d: %d of %d messages failed in some invocation (key in flight elsewhere)", round, len(failedIDs), len(pending))
		pending = slices.DeleteFunc(slices.Clone(pending), func(m events.SQSMessage) bool { return !failedIDs[m.MessageId] })
	}
	assert.Equal(t, want, balances(t, client, ledgerTable))
}

// rotate returns s with its bytes rotated left by n, to give each container its own order.
func rotate(s string, n int) []byte {
	b := []byte(s)
	n %= len(b)
	return append(b[n:], b[:n]...)
}
