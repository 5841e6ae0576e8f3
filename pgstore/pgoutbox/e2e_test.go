package pgoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
	"github.com/idemkit/idem/pgstore/pgoutbox"
	"github.com/idemkit/idem/pgstore/pgstoretest"
	"github.com/idemkit/idem/sqs"
)

const (
	queueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
	queueARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
)

// fakeSQS is an SQS queue behind SendMessageBatch: it checks each request's shape as SQS
// would, delivers what it accepts to a queue the consumer drains, and injects faults by
// call number: a call refused whole, an entry refused alone, an answer lost after the
// messages were delivered.
type fakeSQS struct {
	t  *testing.T
	mu sync.Mutex

	calls                             int
	queue, delivered                  []events.SQSMessage
	refused, entryFailed, lostAnswers int
}

var entryID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *awssqs.SendMessageBatchInput, _ ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.checkShape(in)
	if f.calls%11 == 3 {
		f.refused++
		return nil, errors.New("fake SQS: ServiceUnavailable")
	}
	out := &awssqs.SendMessageBatchOutput{}
	for i, e := range in.Entries {
		if f.calls%7 == 5 && i == 0 {
			f.entryFailed++
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			continue
		}
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range e.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		m := events.SQSMessage{
			MessageId:         fmt.Sprintf("sqs-%d-%d", f.calls, i),
			Body:              aws.ToString(e.MessageBody),
			MessageAttributes: attrs,
			EventSourceARN:    queueARN,
			EventSource:       "aws:sqs",
		}
		f.queue = append(f.queue, m)
		f.delivered = append(f.delivered, m)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(m.MessageId)})
	}
	if f.calls%5 == 2 {
		f.lostAnswers++
		return nil, errors.New("fake SQS: connection reset after the request was sent")
	}
	return out, nil
}

// checkShape reports what SQS would refuse in a request.
func (f *fakeSQS) checkShape(in *awssqs.SendMessageBatchInput) {
	if aws.ToString(in.QueueUrl) != queueURL {
		f.t.Errorf("SendMessageBatch to %q", aws.ToString(in.QueueUrl))
	}
	if n := len(in.Entries); n < 1 || n > 10 {
		f.t.Errorf("SendMessageBatch with %d entries", n)
	}
	ids := map[string]bool{}
	for _, e := range in.Entries {
		id := aws.ToString(e.Id)
		if !entryID.MatchString(id) || ids[id] {
			f.t.Errorf("entry id %q invalid or repeated", id)
		}
		ids[id] = true
		if aws.ToString(e.MessageBody) == "" {
			f.t.Errorf("entry %s: empty body", id)
		}
		if len(e.MessageAttributes) > 10 {
			f.t.Errorf("entry %s: %d message attributes", id, len(e.MessageAttributes))
		}
		for k, v := range e.MessageAttributes {
			if aws.ToString(v.DataType) != "String" || v.StringValue == nil {
				f.t.Errorf("entry %s: attribute %s is not a String", id, k)
			}
		}
	}
}

// take removes up to n messages from the queue.
func (f *fakeSQS) take(n int) []events.SQSMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	n = min(n, len(f.queue))
	out := append([]events.SQSMessage(nil), f.queue[:n]...)
	f.queue = f.queue[n:]
	return out
}

// putBack returns messages to the queue: a redelivery.
func (f *fakeSQS) putBack(msgs []events.SQSMessage) {
	f.mu.Lock()
	f.queue = append(f.queue, msgs...)
	f.mu.Unlock()
}

// crashing publishes, then, every fourth call, kills the relay's connections before the
// relay can mark what was published: a relay crash between publish and mark, as the
// database sees it.
type crashing struct {
	inner outbox.Publisher
	admin *pgxpool.Pool
	app   string
	calls *atomic.Int64
	kills *atomic.Int64
}

func (c crashing) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := c.inner.Publish(ctx, msgs)
	if c.calls.Add(1)%4 == 0 {
		var n int
		_ = c.admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, c.app).Scan(&n)
		c.kills.Add(int64(n))
	}
	return errs
}

// TestEndToEnd runs producer → relays → SQS → consumer on PostgreSQL, with faults: relays
// crash between publish and mark, SQS answers get lost or refuse messages, relays restart,
// three run at once. Every committed event is delivered at least once, every consumer
// effect happens exactly once, each ordering key's events arrive first in commit order,
// and no event of a rolled-back or fenced-off run is ever delivered.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	url := pgtest.URL(t)
	clock := storetest.NewSettableClock()
	e := newEnv(t, idem.WithClock(clock), idem.WithLease(time.Minute))
	ctx := context.Background()
	fake := &fakeSQS{t: t}
	pub := sqspub.New(fake)

	// The consumer: sqs.New with default options, deduplicating on Idempotency-Key.
	var effectsMu sync.Mutex
	effects := map[string]int{}
	types := map[string]string{}
	cg, err := idem.New(pgstoretest.NewStore(t, admin), "consume")
	require.NoError(t, err)
	h, err := sqs.New(cg, func(_ context.Context, m events.SQSMessage) error {
		id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
		effectsMu.Lock()
		effects[id]++
		types[id] = aws.ToString(m.MessageAttributes[sqspub.TypeAttribute].StringValue)
		effectsMu.Unlock()
		return nil
	})
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Add(1)
	go func() { // the consumer: Lambda's event source mapping, in short
		defer wg.Done()
		for runCtx.Err() == nil {
			batch := fake.take(10)
			if len(batch) == 0 {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			resp, err := h.Handle(runCtx, events.SQSEvent{Records: batch})
			if err != nil {
				fake.putBack(batch)
				continue
			}
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			for _, m := range batch {
				if failed[m.MessageId] {
					fake.putBack([]events.SQSMessage{m})
				}
			}
		}
	}()

	// Three relay slots; each restarts its relay every few passes on a new pool, whose
	// connections a crashing publisher kills now and then.
	var calls, kills, restarts atomic.Int64
	for slot := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gen := 0; runCtx.Err() == nil; gen++ {
				app := fmt.Sprintf("relay-%d-%d", slot, gen)
				pool := pgtest.PoolFor(t, url, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = app })
				// Each generation ends after a few committed passes (not after a time, which
				// a loaded machine could make too short for any pass to finish).
				rctx, cancel := context.WithCancel(runCtx)
				var passes atomic.Int64
				r, err := pgoutbox.New(pool, e.store.OutboxTable(), crashing{inner: pub, admin: admin, app: app, calls: &calls, kills: &kills},
					pgoutbox.WithBatchSize(8), pgoutbox.WithPollInterval(50*time.Millisecond), pgoutbox.WithRetryDelay(5*time.Millisecond),
					pgoutbox.WithHooks(pgoutbox.Hooks{OnPass: func(pgoutbox.Pass) {
						if passes.Add(1) == int64(2+slot) {
							cancel()
						}
					}}))
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				_ = r.Run(rctx)
				cancel()
				pool.Close()
				restarts.Add(1)
			}
		}()
	}

	record := func(ctx context.Context, key, typ string) error {
		_, err := outbox.Record(ctx, outbox.Event{Destination: queueURL, OrderingKey: key, Type: typ, Payload: []byte(`{"amount":1}`)})
		return err
	}
	// Fenced-off runs: the first owner records, loses its lease, and completes late; the
	// new owner's event is the one that commits.
	for i := range 5 {
		req := idem.Request{Key: fmt.Sprintf("fenced-%d", i)}
		recorded, resume, firstDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			_, _, err := idem.Do(ctx, e.guard, req, func(ctx context.Context) (string, error) {
				err := record(ctx, "acct-f", "FencedOff")
				close(recorded)
				<-resume
				return "", err
			})
			firstDone <- err
		}()
		<-recorded
		clock.Advance(2 * time.Minute)
		_, _, err := idem.Do(ctx, e.guard, req, func(ctx context.Context) (string, error) {
			return "", record(ctx, "acct-f", "Replacement")
		})
		require.NoError(t, err)
		close(resume)
		require.ErrorIs(t, <-firstDone, idem.ErrLeaseLost)
	}
	// Rolled-back runs: the handler fails, or an attached write does.
	declined := errors.New("declined")
	for i := range 10 {
		_, _, err := idem.Do(ctx, e.guard, idem.Request{Key: fmt.Sprintf("failed-%d", i)}, func(ctx context.Context) (string, error) {
			if err := record(ctx, "acct-0", "RolledBack"); err != nil {
				return "", err
			}
			if i%2 == 0 {
				return "", declined
			}
			return "", pgstore.Attach(ctx, func(context.Context, pgx.Tx) error { return declined })
		})
		require.Error(t, err)
	}
	// Committed runs from four producers, each request sent twice (the replay records
	// nothing).
	var pwg sync.WaitGroup
	for p := range 4 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range 40 {
				req := idem.Request{Key: fmt.Sprintf("order-%d-%d", p, i)}
				for range 2 {
					_, _, err := idem.Do(ctx, e.guard, req, func(ctx context.Context) (string, error) {
						acct := fmt.Sprintf("acct-%d", i%5)
						if err := record(ctx, acct, "Placed"); err != nil {
							return "", err
						}
						return "ok", record(ctx, acct, "Charged")
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	pwg.Wait()

	committed := commitOrder(t, e)
	var all []string
	for _, ids := range committed {
		all = append(all, ids...)
	}
	require.Len(t, all, 4*40*2+5)
	eventually(t, func() bool {
		effectsMu.Lock()
		defer effectsMu.Unlock()
		return len(effects) >= len(all)
	}, "every committed event consumed")
	stop()
	wg.Wait()

	fake.mu.Lock()
	defer fake.mu.Unlock()
	firstSeen := map[string]bool{}
	perKey := map[string][]string{}
	keyOf := map[string]string{}
	for k, ids := range committed {
		for _, id := range ids {
			keyOf[id] = k
		}
	}
	duplicates := 0
	for _, m := range fake.delivered {
		id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
		typ := aws.ToString(m.MessageAttributes[sqspub.TypeAttribute].StringValue)
		require.NotContains(t, []string{"FencedOff", "RolledBack"}, typ, "an event of a fenced-off or rolled-back run")
		k, ok := keyOf[id]
		require.True(t, ok, "delivered event %s was never committed", id)
		if firstSeen[id] {
			duplicates++
			continue
		}
		firstSeen[id] = true
		perKey[k] = append(perKey[k], id)
	}
	assert.Len(t, firstSeen, len(all), "every committed event delivered")
	for k, ids := range committed {
		if !assert.Equal(t, ids, perKey[k], "key %s first delivered in commit order", k) {
			calls := map[string][]string{}
			for _, m := range fake.delivered {
				id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
				calls[id] = append(calls[id], m.MessageId)
			}
			rows, _ := admin.Query(ctx, `SELECT seq, id, committed_at, published_at, attempts FROM "`+e.store.OutboxTable()+`" WHERE ordering_key = $1 ORDER BY seq`, k)
			for rows.Next() {
				var seq int64
				var id string
				var c, p time.Time
				var a int
				_ = rows.Scan(&seq, &id, &c, &p, &a)
				t.Logf("row seq %d id %s committed %s published %s attempts %d deliveries %v", seq, id, c.Format("15:04:05.000000"), p.Format("15:04:05.000000"), a, calls[id])
			}
			rows.Close()
		}
	}
	effectsMu.Lock()
	defer effectsMu.Unlock()
	for _, id := range all {
		assert.Equal(t, 1, effects[id], "event %s (%s) took effect once", id, types[id])
	}
	assert.Len(t, effects, len(all))

	t.Logf("events %d, deliveries %d (duplicates %d), SQS calls %d: refused %d, entries refused %d, answers lost %d; relay connections killed after publish %d, relay restarts %d",
		len(all), len(fake.delivered), duplicates, fake.calls, fake.refused, fake.entryFailed, fake.lostAnswers, kills.Load(), restarts.Load())
	assert.Positive(t, duplicates, "faults made duplicates the consumer dropped")
	assert.Positive(t, fake.lostAnswers)
	assert.Positive(t, kills.Load())
	assert.Positive(t, restarts.Load())
}
