package ddbrelay_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/esm"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ddbrelay"
)

// TestCrashSpendsRetriesPerTimeoutLessMargin: what the package doc says a crash costs.
// A crashed invocation's claims hold their events until its deadline plus the guard's
// lease margin; each retry waits for them until its cut-off, the deadline less the
// relay's margin, and fails there if they still hold. So a crash right at the start of
// an invocation spends fewer than (timeout + lease margin) / (timeout − margin) of the
// mapping's retries: with Lambda's default 3 s timeout (margin 0.75 s, a quarter of it,
// and lease margin 2 s), at most 2, not one per quick retry nor at most one per timeout.
//
// The schedule is TestReview15_CrashedClaimsSpendTheRetries' (DynamoDB Local's stream,
// internal/esm with the template's mapping settings) with a 3 s function timeout.
func TestCrashSpendsRetriesPerTimeoutLessMargin(t *testing.T) {
	const timeout = 3 * time.Second
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tables := samtables.NewTables(t, client, "IdempotencyTable")
	outboxTable := dynamotest.CreateTable(t, client, dynamo.OutboxTableInput("crash-retries"))
	store, err := dynamo.New(client, tables["IdempotencyTable"], dynamo.WithOutboxTable(outboxTable))
	require.NoError(t, err)
	producer, err := idem.New(store, "orders")
	require.NoError(t, err)
	var ids []string
	for i := range 3 {
		_, _, err = idem.Do(ctx, producer, idem.Request{Key: fmt.Sprintf("order-%d", i)}, func(ctx context.Context) (string, error) {
			id, err := outbox.Record(ctx, outbox.Event{Destination: "queue", OrderingKey: fmt.Sprintf("acct-%d", i), Type: "Placed", Payload: []byte(`{}`)})
			ids = append(ids, id)
			return "ok", err
		})
		require.NoError(t, err)
	}

	rec := &recorder{}
	var crashed, dead atomic.Bool
	relayClient := dynamodb.New(client.Options(), func(o *dynamodb.Options) {
		o.HTTPClient = deadHTTP{inner: o.HTTPClient, dead: &dead}
		o.RetryMaxAttempts = 1
	})
	relayStore, err := dynamo.New(relayClient, tables["IdempotencyTable"])
	require.NoError(t, err)
	relayGuard, err := idem.New(relayStore, "outbox-relay")
	require.NoError(t, err)
	relay, err := ddbrelay.New(relayGuard, crashFirst{inner: rec, crashed: &crashed, dead: &dead})
	require.NoError(t, err)
	handle := func(ctx context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		dead.Store(false) // each invocation is a sandbox of its own
		return relay.Handle(ctx, e)
	}
	arn, err := esm.TableStreamARN(ctx, client, outboxTable)
	require.NoError(t, err)
	p, err := esm.New(esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn), handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(),
		esm.WithMaximumRetryAttempts(20), esm.WithTimeout(timeout),
		esm.WithRetryDelay(50*time.Millisecond))
	require.NoError(t, err)
	rep, err := p.Drain(ctx)
	require.NoError(t, err)
	require.True(t, crashed.Load())

	spent := 0
	for _, inv := range rep.Invocations {
		t.Logf("invocation: records %v, retry %d, %v, failures %v, %v", inv.Records, inv.Retry, inv.Outcome, inv.Failures, inv.Err)
		if inv.Outcome == esm.PartialFailure {
			spent++
		}
	}
	margin := timeout / 4 // the relay's margin: DefaultDeadlineMargin, at most a quarter
	bound := float64(timeout+idem.DefaultLeaseMargin) / float64(timeout-margin)
	t.Logf("invocations %d, retries spent on the crashed claims %d (fewer than %.2f)", len(rep.Invocations), spent, bound)
	assert.Less(t, float64(spent), bound, "retries spent on one crash")
	assert.Equal(t, 2, int(math.Ceil(bound))-1, "the doc's figure for a 3 s timeout")
	assert.Empty(t, rep.Discarded)
	published := map[string]bool{}
	for _, id := range rec.took() {
		published[id] = true
	}
	for _, id := range ids {
		assert.True(t, published[id], "committed event %s never published", id)
	}
}
