package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/emf"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/esm"
	"github.com/idemkit/idem/internal/ledgertest"
	"github.com/idemkit/idem/internal/samtables"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// The fixture's invalid record (an order without amount_cents): its sequence number.
const invalidSequenceNumber = "1111000000000000013"

// noMetrics returns a metrics recorder that writes nowhere.
func noMetrics(t *testing.T) *emf.Recorder {
	t.Helper()
	metrics, err := emf.New(io.Discard, "test")
	require.NoError(t, err)
	return metrics
}

// newTestHandler returns the example's handler on fresh tables of infra/template.yaml (the
// orders table too, with the template's stream), the client and the tables by logical ID.
func newTestHandler(t *testing.T, client *dynamodb.Client) (*dynamostream.Handler, map[string]string) {
	t.Helper()
	tables := samtables.NewTables(t, client, "IdempotencyTable", "LedgerTable", "OrdersTable")
	h, err := newHandler(client, tables["IdempotencyTable"], tables["LedgerTable"], slog.New(slog.DiscardHandler), noMetrics(t))
	require.NoError(t, err)
	return h, tables
}

// loadPayload reads an event fixture from testdata.
func loadPayload(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

// invoke runs a batch through the Lambda runtime's handler path (JSON in and out) with a
// deadline as Lambda gives, and returns the sequence numbers of the failed records.
func invoke(t *testing.T, h *dynamostream.Handler, payload []byte) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, payload)
	require.NoError(t, err)
	var resp events.DynamoDBEventResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

// balances reads the balances of the ledger table, by account.
func balances(t *testing.T, client *dynamodb.Client, table string) map[string]int64 {
	t.Helper()
	return ledgertest.Balances(t, client, table, "account_id", "balance_cents")
}

// The fixture's new orders count once each, however often the batch is delivered; the
// order without an amount is the batch item failure; a MODIFY and a REMOVE count nothing.
func TestSalesFixture(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	h, tables := newTestHandler(t, client)
	payload := loadPayload(t, "dynamodb-orders-new.json")
	want := map[string]int64{"sales#sku-1": 800, "sales#sku-2": 700}
	for range 3 { // Lambda retries the batch: what counted replays
		assert.Equal(t, []string{invalidSequenceNumber}, invoke(t, h, payload))
		assert.Equal(t, want, balances(t, client, tables["LedgerTable"]))
	}
}

// TestSalesEndToEndOnStream writes orders as example-api does into the orders table of
// infra/template.yaml on DynamoDB Local, whose stream the template turns on, and drains
// that stream through the example's handler the way the template's event source mapping
// does (internal/esm: ReportBatchItemFailures, BisectBatchOnFunctionError, bounded retries),
// under a crash mid-batch and a lost response: every order counts exactly once, and the
// checkpoint never passed an unsettled record.
func TestSalesEndToEndOnStream(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, tables := newTestHandler(t, client)
	arn, err := esm.TableStreamARN(ctx, client, tables["OrdersTable"])
	require.NoError(t, err, "the template turns the orders table's stream on")

	want := map[string]int64{}
	for i := range 15 {
		sku := fmt.Sprintf("sku-%d", i%3)
		amount := int64(100 * (i + 1))
		want[salesAccountPrefix+sku] += amount
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tables["OrdersTable"]), Item: map[string]types.AttributeValue{
			"id":           &types.AttributeValueMemberS{Value: fmt.Sprintf("o-%02d", i)},
			"sku":          &types.AttributeValueMemberS{Value: sku},
			"quantity":     &types.AttributeValueMemberN{Value: "1"},
			"amount_cents": &types.AttributeValueMemberN{Value: strconv.FormatInt(amount, 10)},
			"created_at":   &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)},
		}})
		require.NoError(t, err)
	}

	var (
		mu      sync.Mutex
		crashed bool
		lost    atomic.Bool // the fault hook runs on each shard's goroutine
	)
	handle := func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		mu.Lock()
		crash := !crashed && len(ev.Records) > 2
		crashed = crashed || crash
		mu.Unlock()
		if crash { // the first records' effects commit, then the invocation dies
			_, _ = h.Handle(ctx, events.DynamoDBEvent{Records: ev.Records[:2]})
			esm.Crash(ctx)
			return events.DynamoDBEventResponse{}, ctx.Err()
		}
		return h.Handle(ctx, ev)
	}
	p, err := esm.New(esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn), handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(), esm.WithMaximumRetryAttempts(10),
		esm.WithBatchSize(6), esm.WithTimeout(10*time.Second), esm.WithRetryDelay(50*time.Millisecond),
		esm.WithFault(func(b esm.Batch) esm.Fault {
			mu.Lock()
			after := crashed
			mu.Unlock()
			if after && b.Retry == 0 && len(b.Records) == 6 && lost.CompareAndSwap(false, true) {
				return esm.FaultLoseResponse // a batch's work done, its answer lost
			}
			return esm.FaultNone
		}))
	require.NoError(t, err)
	rep, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Check())
	assert.True(t, crashed)
	assert.True(t, lost.Load())
	assert.Empty(t, rep.Discarded, "no record sent to the on-failure destination")
	assert.Equal(t, want, balances(t, client, tables["LedgerTable"]), "every order counted exactly once")
	var delivered []int
	for _, n := range rep.Delivered() {
		delivered = append(delivered, n)
	}
	assert.Len(t, delivered, 15)
	assert.Greater(t, slices.Max(delivered), 1, "some record was delivered again")
}
