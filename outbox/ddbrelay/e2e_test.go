package ddbrelay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/esm"
	"github.com/idemkit/idem/internal/outboxe2e"
	"github.com/idemkit/idem/internal/samtables"
	"github.com/idemkit/idem/internal/sqsfake"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ddbrelay"
	"github.com/idemkit/idem/outbox/sqspub"
)

// crashing publishes, then ends the invocation every fourth call as a dying process
// would (esm.Crash): the message is with the broker, the relay never learns it.
type crashing struct {
	inner   outbox.Publisher
	calls   *atomic.Int64
	crashes *atomic.Int64
}

func (c crashing) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := c.inner.Publish(ctx, msgs)
	if c.calls.Add(1)%4 == 0 && esm.Crash(ctx) {
		c.crashes.Add(1)
	}
	return errs
}

// TestEndToEnd runs producer → outbox table's stream (DynamoDB Local) → Lambda's event
// source mapping (internal/esm: checkpoint at the lowest reported failure, bisection) →
// relay → SQS (a fake that checks request shapes) → consumer (sqs.New, default options),
// on a standard and a FIFO queue, with faults: SQS refuses calls and entries and loses
// answers, the relay crashes mid-batch after a publish, producers' runs roll back or are
// fenced off. Every committed event is delivered at least once, every consumer effect
// happens exactly once, each ordering key's events arrive first in commit order, no event
// of a rolled-back or fenced-off run is ever delivered, and the stream's checkpoint never
// passed an event not published.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			endToEnd(t, fifo)
		})
	}
}

func endToEnd(t *testing.T, fifo bool) {
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a loaded machine
	defer cancel()
	tables := samtables.NewTables(t, client, "IdempotencyTable")
	outboxTable := dynamotest.CreateTable(t, client, dynamo.OutboxTableInput("e2e-outbox"))
	queueURL, queueARN := "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", "arn:aws:sqs:eu-west-1:123456789012:orders"
	if fifo {
		queueURL, queueARN = queueURL+".fifo", queueARN+".fifo"
	}

	// The producer: guarded handlers on dynamo.Store with the outbox table.
	clock := storetest.NewSettableClock()
	store, err := dynamo.New(client, tables["IdempotencyTable"], dynamo.WithOutboxTable(outboxTable))
	require.NoError(t, err)
	guard, err := idem.New(store, "orders", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)
	record := func(ctx context.Context, key, typ string) (string, error) {
		return outbox.Record(ctx, outbox.Event{Destination: queueURL, OrderingKey: key, Type: typ, Payload: []byte(`{"amount":1}`)})
	}
	var mu sync.Mutex
	committed := map[string][]string{} // ordering key → event ids in commit order

	// Runs that must never be delivered: fenced off (the new owner's event commits), and
	// rolled back (the handler fails, or an attached write's condition does).
	committed["acct-f"] = outboxe2e.FencedOff(t, ctx, guard, clock, 2*time.Minute, 3, "acct-f", record)
	outboxe2e.RolledBack(t, ctx, guard, 6, "acct-0-0", record, func(ctx context.Context) error {
		return dynamo.Attach(ctx, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:           aws.String(outboxTable),
			Key:                 map[string]types.AttributeValue{dynamo.OutboxOrderingKeyAttr: &types.AttributeValueMemberS{Value: "none"}, dynamo.OutboxIDAttr: &types.AttributeValueMemberS{Value: "none"}},
			ConditionExpression: aws.String("attribute_exists(id)"),
		}})
	})
	// Committed runs from three producers, each owning its ordering keys (so each key's
	// commit order is its producer's), two events per run, each request sent twice (the
	// replay records nothing).
	var pwg sync.WaitGroup
	for p := range 3 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range 20 {
				req := idem.Request{Key: fmt.Sprintf("order-%d-%d", p, i)}
				acct := fmt.Sprintf("acct-%d-%d", p, i%3)
				for range 2 {
					var ids []string
					_, replayed, err := idem.Do(ctx, guard, req, func(ctx context.Context) (string, error) {
						for _, typ := range []string{"Placed", "Charged"} {
							id, err := record(ctx, acct, typ)
							if err != nil {
								return "", err
							}
							ids = append(ids, id)
						}
						return "ok", nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					if !replayed {
						mu.Lock()
						committed[acct] = append(committed[acct], ids...)
						mu.Unlock()
					}
				}
			}
		}()
	}
	pwg.Wait()
	require.False(t, t.Failed())

	// The relay, through the event source mapping, to SQS.
	queue := sqsfake.New(t, queueURL, queueARN, sqsfake.EveryNth)
	relayGuard, err := idem.New(store, "outbox-relay")
	require.NoError(t, err)
	var calls, crashes atomic.Int64
	relay, err := ddbrelay.New(relayGuard, crashing{inner: sqspub.New(queue), calls: &calls, crashes: &crashes})
	require.NoError(t, err)
	arn, err := esm.TableStreamARN(ctx, client, outboxTable)
	require.NoError(t, err)
	p, err := esm.New(esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn), relay.Handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(), esm.WithBatchSize(16),
		esm.WithTimeout(10*time.Second), esm.WithRetryDelay(20*time.Millisecond))
	require.NoError(t, err)
	rep, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Check(), "the checkpoint never passed an unsettled record")
	assert.Empty(t, rep.Discarded)

	// The consumer: sqs.New with default options, deduplicating on Idempotency-Key.
	consumer := outboxe2e.NewConsumer(t, store)
	keyOf := map[string]string{}
	for k, ids := range committed {
		for _, id := range ids {
			keyOf[id] = k
		}
	}
	all := len(keyOf)
	require.Equal(t, 3*20*2+3, all)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); queue.Consume(cctx, consumer.Handle) }()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if len(consumer.Effects()) >= all || time.Now().After(deadline) {
			break
		}
	}
	stop()
	<-done

	delivered := queue.Delivered()
	if fifo {
		for _, m := range delivered {
			id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
			assert.Equal(t, keyOf[id], m.Attributes["MessageGroupId"])
		}
	}
	duplicates, _ := outboxe2e.Check(t, delivered, committed, consumer.Effects())
	st := queue.Stats()
	t.Logf("events %d, invocations %d, deliveries to SQS %d (duplicates %d), SQS calls %d: refused %d, entries refused %d, answers lost %d; relay crashes after publish %d",
		all, len(rep.Invocations), len(delivered), duplicates, st.Calls, st.Refused, st.EntriesFailed, st.LostAnswers, crashes.Load())
	assert.Positive(t, st.LostAnswers)
	assert.Positive(t, st.Refused)
	assert.Positive(t, crashes.Load())
	if !fifo {
		assert.Positive(t, duplicates, "faults made duplicates the consumer dropped")
	}
}
