package ddbrelay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
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

// crashFirst ends the first invocation that calls it, before the broker sees anything
// (esm.Crash: a dying sandbox, an out-of-memory kill); every later call goes to inner.
// From the crash on, dead is set: the dead sandbox sends nothing more (see deadHTTP).
type crashFirst struct {
	inner   outbox.Publisher
	crashed *atomic.Bool
	dead    *atomic.Bool
}

func (c crashFirst) Publish(ctx context.Context, msgs []outbox.Message) []error {
	if c.crashed.CompareAndSwap(false, true) {
		c.dead.Store(true)
		esm.Crash(ctx)
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = errors.New("the sandbox died")
		}
		return errs
	}
	return c.inner.Publish(ctx, msgs)
}

// deadHTTP fails every request while dead is set: a sandbox that died sends nothing,
// so the claims it took are not released (Go cannot kill the crashed invocation's
// goroutine as Lambda kills a sandbox; this stands for it).
type deadHTTP struct {
	inner interface {
		Do(*http.Request) (*http.Response, error)
	}
	dead *atomic.Bool
}

func (d deadHTTP) Do(r *http.Request) (*http.Response, error) {
	if d.dead.Load() {
		return nil, errors.New("the sandbox is dead")
	}
	return d.inner.Do(r)
}

// TestReview15_CrashedClaimsSpendTheRetries: the relay runs with the event source
// mapping's settings of infra/template.yaml (ReportBatchItemFailures, bisection,
// MaximumRetryAttempts 20, the function's 30 s timeout) on DynamoDB Local's stream.
//
//  1. Producers commit ten events (five ordering keys, two each); their INSERTs reach
//     the relay in one batch.
//  2. Invocation 1 claims every event id of the batch on the relay's guard (batch claims:
//     in progress, lease to the Lambda deadline) and dies in its first publish, before
//     the broker sees anything (esm.Crash; the dead sandbox sends nothing more): the
//     claims stay in progress until their lease ends.
//  3. Lambda retries (the crash is a function error: bisection, then the halves). Each
//     retry's claims find the keys in progress (idem.ErrInProgress): the relay reports
//     the first record failed, a partial failure, which counts as a retry of the batch.
//  4. Twenty such retries take far less than the lease (30 s plus its margin; each retry
//     here takes milliseconds, paced at 50 ms): the records from the reported one on are
//     discarded to the on-failure destination. Committed events of every key in the
//     batch, never published.
//
// Lost event (severity: the outbox's promise "every committed event is delivered at
// least once" broken after a single crash). The relay should not spend the mapping's
// retries on a claim it knows is a crashed run's: wait (up to the lease, inside the
// invocation) or answer so that the retry does not count.
func TestReview15_CrashedClaimsSpendTheRetries(t *testing.T) {
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tables := samtables.NewTables(t, client, "IdempotencyTable")
	outboxTable := dynamotest.CreateTable(t, client, dynamo.OutboxTableInput("review15-crash"))
	store, err := dynamo.New(client, tables["IdempotencyTable"], dynamo.WithOutboxTable(outboxTable))
	require.NoError(t, err)
	producer, err := idem.New(store, "orders")
	require.NoError(t, err)
	var ids []string
	for i := range 5 {
		_, _, err = idem.Do(ctx, producer, idem.Request{Key: fmt.Sprintf("order-%d", i)}, func(ctx context.Context) (string, error) {
			for _, typ := range []string{"Placed", "Charged"} {
				id, err := outbox.Record(ctx, outbox.Event{Destination: "queue", OrderingKey: fmt.Sprintf("acct-%d", i), Type: typ, Payload: []byte(`{}`)})
				if err != nil {
					return "", err
				}
				ids = append(ids, id)
			}
			return "ok", nil
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
	// Each invocation is a sandbox of its own: the next one, after the crash, is alive.
	handle := func(ctx context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		dead.Store(false)
		return relay.Handle(ctx, e)
	}
	arn, err := esm.TableStreamARN(ctx, client, outboxTable)
	require.NoError(t, err)
	// infra/template.yaml's OutboxRelayMapping and OutboxRelayFunction (Timeout: 30).
	p, err := esm.New(esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn), handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(),
		esm.WithMaximumRetryAttempts(20), esm.WithTimeout(30*time.Second),
		esm.WithRetryDelay(50*time.Millisecond))
	require.NoError(t, err)
	rep, err := p.Drain(ctx)
	require.NoError(t, err)
	require.True(t, crashed.Load())

	inProgress := 0
	for _, inv := range rep.Invocations {
		if inv.Outcome == esm.PartialFailure {
			inProgress++
		}
	}
	t.Logf("invocations %d (partial failures on the crashed claim %d), discarded %d", len(rep.Invocations), inProgress, len(rep.Discarded))
	discarded := 0
	for _, d := range rep.Discarded {
		discarded += len(d.Records)
	}
	t.Logf("records discarded: %d of %d", discarded, len(ids))
	assert.Empty(t, rep.Discarded, "committed events were sent to the on-failure destination: never published")
	// At least once: an event the crashed invocation's call carried may go out again after
	// the takeover (the relay promises at least once; consumers dedup on the id).
	published := map[string]bool{}
	for _, id := range rec.took() {
		published[id] = true
	}
	for _, id := range ids {
		assert.True(t, published[id], "committed event %s never published", id)
	}
	assert.Len(t, published, len(ids), "only committed events published")
}

// TestReview15_PositionSortAcrossRuns: the relay sorts "consecutive records of one run
// (the same stored key, no position twice)" by position. When a batch begins inside a
// run (the record before it was published in the previous batch, or the batch starts at
// the record Lambda was told failed), the run's tail and the next run of the same stored
// key (a request run again after its record expired: idem.DefaultExpiry is an hour, and
// the template lets a stuck key's records wait six hours) look like one run, and the
// next run's first event is published before the earlier run's last one.
//
//  1. Run 1 of stored key s commits a-1 (position 0) and a-2 (position 1); later run 2
//     of s commits a-3 (position 0) and a-4 (position 1); all on ordering key a.
//  2. Batch 1 holds a-1, a-2: a-1 is published, a-2 is refused once; the relay reports
//     a-2 and Lambda delivers the shard again from it.
//  3. Batch 2 holds a-2, a-3, a-4. The relay takes a-2 (position 1) and a-3 (position 0)
//     for one run and sorts them: a-3 goes out before a-2.
//
// Order broken: the ordering key's events reach the broker a-1, a-3, a-2, a-4, not in
// commit order.
func TestReview15_PositionSortAcrossRuns(t *testing.T) {
	var mu sync.Mutex
	refused := false
	rec := &recorder{fail: func(m outbox.Message, attempt int) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		if m.ID == "a-2" && !refused {
			refused = true
			return true, false
		}
		return false, false
	}}
	relay := newRelay(t, rec)
	ctx := context.Background()

	b1, err := relay.Handle(ctx, eventOf(insert("1", "a", "a-1", "s", 0), insert("2", "a", "a-2", "s", 1)))
	require.NoError(t, err)
	require.Equal(t, []string{"2"}, failures(b1))
	b2, err := relay.Handle(ctx, eventOf(insert("2", "a", "a-2", "s", 1), insert("3", "a", "a-3", "s", 0), insert("4", "a", "a-4", "s", 1)))
	require.NoError(t, err)
	require.Empty(t, failures(b2))
	assert.Equal(t, []string{"a-1", "a-2", "a-3", "a-4"}, rec.took(), "the ordering key's events in commit order")
}

func eventOf(recs ...events.DynamoDBEventRecord) events.DynamoDBEvent {
	return events.DynamoDBEvent{Records: recs}
}

// panicky is a slow recorder (its first call takes a while, so the other keys' events
// queue up for the next call) that panics on a call of several messages, as a publisher
// can on a message it cannot handle (a nil dereference in an SDK, a bad header).
type panicky struct {
	slowRecorder
	panicked atomic.Bool
}

func (p *panicky) Publish(ctx context.Context, msgs []outbox.Message) []error {
	if len(msgs) > 1 {
		p.panicked.Store(true)
		panic("publisher bug")
	}
	return p.slowRecorder.Publish(ctx, msgs)
}

// TestReview15_PanicInGroupCallHangsTheBatch: a publisher that panics in a call that
// carries several keys' events (the group commit of together.go).
//
//  1. Keys a, b, c each have one event; the first call (one event) is slow, so the other
//     two keys' events wait for the next call.
//  2. The next call's leader calls the publisher, which panics. The engine recovers the
//     panic for the leader's item (batch.ReasonPanic), but together.publish never hands
//     the other waiting event its outcome and never clears busy: that event's goroutine
//     waits forever, without looking at its context.
//  3. Process never returns; in Lambda the invocation times out, every claim of the batch
//     stays in progress until its lease ends, and the batch is retried (and, with the
//     template's 20 retries, can be discarded: see TestReview15_CrashedClaimsSpendTheRetries).
//
// The batch engine promises that "a panicking run fails its item and no other"; the
// relay's group call breaks it. Severity: a stuck shard (every key behind it), and lost
// events through the retries.
func TestReview15_PanicInGroupCallHangsTheBatch(t *testing.T) {
	t.Parallel()
	pub := &panicky{}
	r := newRelay(t, pub, ddbrelay.WithConcurrency(3))
	// A bound far beyond the few milliseconds the batch needs: reaching it is a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	var resp events.DynamoDBEventResponse
	var err error
	go func() {
		defer close(done)
		resp, err = r.Handle(ctx, eventOf(insert("1", "a", "a-1", "sa", 0), insert("2", "b", "b-1", "sb", 0), insert("3", "c", "c-1", "sc", 0)))
	}()
	select {
	case <-done:
	case <-ctx.Done():
		require.True(t, pub.panicked.Load())
		t.Fatal("Handle never returned after the publisher panicked in a call of several events (still not after the context ended)")
	}
	require.NoError(t, err)
	require.True(t, pub.panicked.Load(), "the schedule needs a call of several events")
	assert.NotEmpty(t, resp.BatchItemFailures)
}

// capture is a publisher that keeps every message handed to it.
type capture struct {
	mu   sync.Mutex
	msgs []outbox.Message
}

func (c *capture) Publish(_ context.Context, msgs []outbox.Message) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, msgs...)
	return nil
}

// TestReview15_InsertDecodesAsRecorded: what the relay hands the publisher, read from
// DynamoDB Local's stream through Lambda's JSON (internal/esm), is the message the
// producer recorded: destination, ordering key, type, headers (empty values included),
// a binary payload that is not UTF-8, an empty payload, the stored key and the recording
// time to the millisecond. A field decoded wrongly would be acknowledged and published
// wrong; this passes on main (coverage).
func TestReview15_InsertDecodesAsRecorded(t *testing.T) {
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tables := samtables.NewTables(t, client, "IdempotencyTable")
	outboxTable := dynamotest.CreateTable(t, client, dynamo.OutboxTableInput("review15-decode"))
	store, err := dynamo.New(client, tables["IdempotencyTable"], dynamo.WithOutboxTable(outboxTable))
	require.NoError(t, err)
	producer, err := idem.New(store, "orders")
	require.NoError(t, err)
	evs := []outbox.Event{
		{Destination: "arn:aws:sns:eu-west-1:123456789012:orders.fifo", OrderingKey: "acct-ü 1", Type: "Placed",
			Payload: []byte{0xff, 0x00, 0xfe, 'x'}, Headers: map[string]string{"tenant": "t1", "empty": "", "ünï": "✓"}},
		{Destination: "default", OrderingKey: "acct-ü 1", Type: "Empty"},
		{Destination: "q", Type: "Unordered", Payload: []byte(`{"n":1.50}`)},
	}
	var want []outbox.Message
	var storedKey string
	_, _, err = idem.Do(ctx, producer, idem.Request{Key: "order-1"}, func(ctx context.Context) (string, error) {
		storedKey = idem.StoredKey(ctx)
		for _, e := range evs {
			id, err := outbox.Record(ctx, e)
			if err != nil {
				return "", err
			}
			m := outbox.Message{OutboxEvent: e, ID: id, StoredKey: storedKey}
			if m.OrderingKey == "" {
				m.OrderingKey = id
			}
			want = append(want, m)
		}
		return "ok", nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, storedKey)

	pub := &capture{}
	relayGuard, err := idem.New(store, "outbox-relay")
	require.NoError(t, err)
	relay, err := ddbrelay.New(relayGuard, pub)
	require.NoError(t, err)
	arn, err := esm.TableStreamARN(ctx, client, outboxTable)
	require.NoError(t, err)
	p, err := esm.New(esm.NewDynamoDBStream(esm.NewStreamsClient(endpoint), arn), relay.Handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError())
	require.NoError(t, err)
	rep, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Check())
	require.Empty(t, rep.Discarded)

	pub.mu.Lock()
	defer pub.mu.Unlock()
	got := map[string]outbox.Message{}
	for _, m := range pub.msgs {
		assert.False(t, m.RecordedAt.IsZero())
		assert.Equal(t, m.RecordedAt, m.RecordedAt.Truncate(time.Millisecond))
		m.RecordedAt = time.Time{}
		got[m.ID] = m
	}
	require.Len(t, got, len(want))
	for _, w := range want {
		g := got[w.ID]
		if len(w.Payload) == 0 {
			assert.Empty(t, g.Payload)
			g.Payload = w.Payload
		}
		assert.Equal(t, w, g, "event %s", w.ID)
	}
}
