package ddbrelay_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ddbrelay"
)

// insert returns the INSERT stream record of the outbox item dynamo.Store puts for the
// event id of ordering key key, the position-th of the run storedKey, as Lambda delivers it.
// The item has no run (dynamo.OutboxRunAttr), as an item written before runs existed.
func insert(seq, key, id, storedKey string, position int) events.DynamoDBEventRecord {
	return insertRun(seq, key, id, storedKey, "", position)
}

// insertRun is insert for an item of the run run, as dynamo.OutboxWrites writes it.
func insertRun(seq, key, id, storedKey, run string, position int) events.DynamoDBEventRecord {
	m := outbox.Message{
		OutboxEvent: outbox.Event{Destination: "queue", OrderingKey: key, Type: "T" + id, Payload: []byte(`{"id":"` + id + `"}`)},
		ID:          id, StoredKey: storedKey, RecordedAt: time.UnixMilli(1_700_000_000_000),
	}
	item := dynamo.OutboxRunItem("outbox", m, run, position).Put.Item
	return events.DynamoDBEventRecord{
		EventID: "ev-" + seq, EventName: "INSERT", EventSource: "aws:dynamodb",
		EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/outbox/stream/2026-11-27T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			SequenceNumber: seq, StreamViewType: "NEW_IMAGE",
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1_700_000_000, 0)},
			Keys: map[string]events.DynamoDBAttributeValue{
				dynamo.OutboxOrderingKeyAttr: events.NewStringAttribute(key), dynamo.OutboxIDAttr: events.NewStringAttribute(id),
			},
			NewImage: image(item),
		},
	}
}

// image converts an item to the stream record's attribute values (S, N, B, M only).
func image(item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	out := map[string]events.DynamoDBAttributeValue{}
	for k, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = events.NewStringAttribute(v.Value)
		case *types.AttributeValueMemberN:
			out[k] = events.NewNumberAttribute(v.Value)
		case *types.AttributeValueMemberB:
			out[k] = events.NewBinaryAttribute(v.Value)
		case *types.AttributeValueMemberM:
			out[k] = events.NewMapAttribute(image(v.Value))
		}
	}
	return out
}

// removed returns the REMOVE record of a TTL deletion of the item.
func removed(seq, key, id string) events.DynamoDBEventRecord {
	r := insert(seq, key, id, "s", 0)
	r.EventName, r.Change.NewImage = "REMOVE", nil
	r.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	return r
}

// recorder is a publisher that records each message handed to it, and fails those fail
// picks (attempt counts from 1 per message id). lost says the message was published
// although it is reported failed (the broker's answer was lost).
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
	sent []string // ids handed over, in order, failed ones included
	ok   []string // ids the broker took (reported published or not)
	fail func(m outbox.Message, attempt int) (failed, lost bool)
}

func (r *recorder) Publish(_ context.Context, msgs []outbox.Message) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	errs := make([]error, len(msgs))
	keys := map[string]bool{}
	for i, m := range msgs {
		if keys[m.OrderingKey] {
			panic("two messages of one ordering key in one call")
		}
		keys[m.OrderingKey] = true
		r.seen[m.ID]++
		r.sent = append(r.sent, m.ID)
		failed, lost := false, false
		if r.fail != nil {
			failed, lost = r.fail(m, r.seen[m.ID])
		}
		if !failed || lost {
			r.ok = append(r.ok, m.ID)
		}
		if failed {
			errs[i] = fmt.Errorf("broker refused %s", m.ID)
		}
	}
	return errs
}

func (r *recorder) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ok...)
}

// perKey returns ids grouped by their ordering key (the letter before the dash).
func perKey(ids []string) map[string][]string {
	out := map[string][]string{}
	for _, id := range ids {
		out[id[:1]] = append(out[id[:1]], id)
	}
	return out
}

func newRelay(t *testing.T, pub outbox.Publisher, opts ...ddbrelay.Option) *ddbrelay.Relay {
	t.Helper()
	g, err := idem.New(memstore.New(), "relay")
	require.NoError(t, err)
	r, err := ddbrelay.New(g, pub, opts...)
	require.NoError(t, err)
	return r
}

func failures(resp events.DynamoDBEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// TestRelayPublishesInserts: INSERT records are published, a run's events of one key in
// their position order however the stream ordered them, each key's in stream order;
// TTL deletions (REMOVE) and MODIFY records are acknowledged without publishing.
func TestRelayPublishesInserts(t *testing.T) {
	t.Parallel()
	pub := &recorder{}
	r := newRelay(t, pub)
	modify := insert("107", "b", "b-9", "s3", 0)
	modify.EventName = "MODIFY"
	resp, err := r.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		removed("100", "a", "a-0"),
		insertRun("101", "a", "a-2", "s1", "a-1", 1), // the stream put the run's second event first
		insertRun("102", "b", "b-1", "s2", "b-1", 0),
		insertRun("103", "a", "a-1", "s1", "a-1", 0),
		insertRun("104", "a", "a-3", "s4", "a-3", 0), // a later run of key a
		insertRun("105", "b", "b-2", "s2", "b-1", 1),
		removed("106", "b", "b-0"),
		modify,
	}})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	got := perKey(pub.took())
	assert.Equal(t, []string{"a-1", "a-2", "a-3"}, got["a"])
	assert.Equal(t, []string{"b-1", "b-2"}, got["b"])
	assert.Len(t, pub.took(), 5, "nothing but the inserts")
}

// TestRelaySortsWithinOneRun: two runs of one stored key (a request run again after its
// record expired) are told apart by their run: a batch that begins in the first run's
// tail publishes it before the second run, whose own events are sorted by position. Items
// without a run keep the stream's order.
func TestRelaySortsWithinOneRun(t *testing.T) {
	t.Parallel()
	pub := &recorder{}
	r := newRelay(t, pub)
	resp, err := r.Handle(context.Background(), eventOf(
		insertRun("1", "a", "a-2", "s", "a-1", 1), // the tail of run a-1
		insertRun("2", "a", "a-4", "s", "a-3", 1), // run a-3, its records reversed
		insertRun("3", "a", "a-3", "s", "a-3", 0),
		insert("4", "b", "b-2", "t", 1), // no run: stream order
		insert("5", "b", "b-1", "t", 0),
	))
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	got := perKey(pub.took())
	assert.Equal(t, []string{"a-2", "a-3", "a-4"}, got["a"])
	assert.Equal(t, []string{"b-2", "b-1"}, got["b"])
}

// TestRelayReportsTheLowestUnpublished: a failed publish stops its key and reports the
// lowest sequence number among the key's unpublished records, which is not the failed
// record's when the run's positions reversed the stream's order; Lambda delivers the key
// again from there and nothing is skipped. Other keys go on. On the redelivery the
// published events replay from the guard's store and are not sent again.
func TestRelayReportsTheLowestUnpublished(t *testing.T) {
	t.Parallel()
	down := true
	pub := &recorder{fail: func(m outbox.Message, _ int) (bool, bool) { return down && m.ID == "a-1", false }}
	r := newRelay(t, pub)
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		insertRun("201", "a", "a-0", "s1", "a-0", 0),
		insertRun("202", "a", "a-2", "s2", "a-1", 1), // published after a-1, which fails
		insertRun("203", "b", "b-0", "s3", "b-0", 0),
		insertRun("204", "a", "a-1", "s2", "a-1", 0),
		insertRun("205", "a", "a-3", "s4", "a-3", 0),
	}}
	resp, err := r.Handle(context.Background(), batch)
	require.NoError(t, err)
	assert.Equal(t, []string{"202"}, failures(resp), "a-1 failed; a-2 (202) is the lowest unpublished of key a")
	assert.Equal(t, []string{"a-0", "b-0"}, pub.took())

	down = false
	batch.Records = batch.Records[1:] // Lambda delivers the shard from 202 on
	resp, err = r.Handle(context.Background(), batch)
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, []string{"a-0", "b-0", "a-1", "a-2", "a-3"}, pub.took(), "b-0 replayed, not sent again")
}

// TestRelayLostAnswerPublishesAgain: a publish the broker took but whose answer was lost
// is reported failed and sent again on the redelivery, with the same event id: at least
// once, the consumer deduplicates.
func TestRelayLostAnswerPublishesAgain(t *testing.T) {
	t.Parallel()
	pub := &recorder{fail: func(m outbox.Message, attempt int) (bool, bool) { return attempt == 1, true }}
	r := newRelay(t, pub)
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{insert("301", "a", "a-0", "s1", 0)}}
	resp, err := r.Handle(context.Background(), batch)
	require.NoError(t, err)
	assert.Equal(t, []string{"301"}, failures(resp))
	resp, err = r.Handle(context.Background(), batch)
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, []string{"a-0", "a-0"}, pub.took())
}

// TestRelayFailsAnUnreadableInsert: an INSERT whose image is not an outbox item (a
// KEYS_ONLY stream, an item written by something else) fails and is reported: the relay
// never acknowledges an event it did not publish.
func TestRelayFailsAnUnreadableInsert(t *testing.T) {
	t.Parallel()
	pub := &recorder{}
	r := newRelay(t, pub)
	bad := insert("402", "a", "a-1", "s2", 0)
	delete(bad.Change.NewImage, dynamo.OutboxDestinationAttr)
	keysOnly := insert("403", "b", "b-0", "s3", 0)
	keysOnly.Change.NewImage = nil
	rep, err := r.Process(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		insert("401", "a", "a-0", "s1", 0), bad, insert("404", "a", "a-2", "s4", 0), keysOnly,
	}})
	require.NoError(t, err)
	assert.Equal(t, []string{"402", "403"}, failures(rep.Response()))
	assert.Equal(t, []string{"a-0"}, pub.took())
	assert.Equal(t, 1, rep.Published)
	assert.Equal(t, 3, rep.Failed)
}

// TestRelayPublisherAnswersAnotherLength: a publisher answer with no error per message
// counts the message failed, as outbox.Publisher says.
func TestRelayPublisherAnswersAnotherLength(t *testing.T) {
	t.Parallel()
	r := newRelay(t, outbox.PublisherFunc(func(context.Context, []outbox.Message) []error {
		return []error{nil, nil}
	}))
	resp, err := r.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{insert("501", "a", "a-0", "s1", 0)}})
	require.NoError(t, err)
	assert.Equal(t, []string{"501"}, failures(resp))
}

// TestRelayOnLag: OnLag gets the age of the batch's oldest record, by the guard's clock.
func TestRelayOnLag(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSettableClock()
	clock.Set(time.Unix(1_700_000_042, 0))
	g, err := idem.New(memstore.New(), "relay", idem.WithClock(clock))
	require.NoError(t, err)
	var lags []time.Duration
	r, err := ddbrelay.New(g, &recorder{}, ddbrelay.WithHooks(ddbrelay.Hooks{OnLag: func(d time.Duration) { lags = append(lags, d) }}))
	require.NoError(t, err)
	old := insert("601", "a", "a-0", "s1", 0)
	old.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: time.Unix(1_700_000_030, 0)}
	rep, err := r.Process(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		insert("600", "a", "a-9", "s0", 0), old, insert("602", "b", "b-0", "s2", 0),
	}})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{42 * time.Second}, lags, "oldest record 1_700_000_000")
	assert.Equal(t, 42*time.Second, rep.Lag)
	_, err = r.Process(context.Background(), events.DynamoDBEvent{})
	require.NoError(t, err)
	assert.Len(t, lags, 1, "an empty batch has no lag")

	// A record stamped after the relay's now (clocks apart, whole seconds) is no lag.
	ahead := insert("603", "c", "c-0", "s3", 0)
	ahead.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: time.Unix(1_700_000_043, 0)}
	rep, err = r.Process(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{ahead}})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{42 * time.Second, 0}, lags)
	assert.Zero(t, rep.Lag)
}

// TestNewRefusesBadInput: a nil guard or publisher, or a bad option.
func TestNewRefusesBadInput(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "relay")
	require.NoError(t, err)
	cases := []struct {
		name  string
		guard *idem.Guard
		pub   outbox.Publisher
		opts  []ddbrelay.Option
	}{
		{"nil guard", nil, &recorder{}, nil},
		{"nil publisher", g, nil, nil},
		{"concurrency 0", g, &recorder{}, []ddbrelay.Option{ddbrelay.WithConcurrency(0)}},
		{"negative margin", g, &recorder{}, []ddbrelay.Option{ddbrelay.WithDeadlineMargin(-time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ddbrelay.New(tc.guard, tc.pub, tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
		})
	}
}

// TestRelayConcurrencyKeepsKeyOrder: many keys at once, each key's events in order.
func TestRelayConcurrencyKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	pub := &recorder{}
	r := newRelay(t, pub, ddbrelay.WithConcurrency(4))
	var recs []events.DynamoDBEventRecord
	want := map[string][]string{}
	for i := range 60 {
		k := string(rune('a' + i%6))
		id := k + "-" + strconv.Itoa(i)
		recs = append(recs, insert(strconv.Itoa(1000+i), k, id, "s"+strconv.Itoa(i), 0))
		want[k] = append(want[k], id)
	}
	resp, err := r.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, want, perKey(pub.took()))
}

// slowRecorder is a recorder whose first call takes a while, as a broker's round trip
// can, and that notes each call's size.
type slowRecorder struct {
	recorder
	sizes []int
}

func (s *slowRecorder) Publish(ctx context.Context, msgs []outbox.Message) []error {
	s.mu.Lock()
	first := len(s.sizes) == 0
	s.sizes = append(s.sizes, len(msgs))
	s.mu.Unlock()
	if first {
		// Long enough for the other keys' first events to arrive meanwhile, on a loaded
		// machine too; they must then go out together in the next call.
		time.Sleep(200 * time.Millisecond)
	}
	return s.recorder.Publish(ctx, msgs)
}

// TestRelayPublishesTogether: the events of keys published at the same time go to the
// publisher together (fewer calls: SendMessageBatch takes ten), never two of one key in a
// call, each key's in order.
func TestRelayPublishesTogether(t *testing.T) {
	t.Parallel()
	pub := &slowRecorder{}
	r := newRelay(t, pub, ddbrelay.WithConcurrency(8))
	var recs []events.DynamoDBEventRecord
	want := map[string][]string{}
	for i := range 80 {
		k := string(rune('a' + i%8))
		id := k + "-" + strconv.Itoa(i)
		recs = append(recs, insert(strconv.Itoa(2000+i), k, id, "s"+strconv.Itoa(i), 0))
		want[k] = append(want[k], id)
	}
	resp, err := r.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	assert.Equal(t, want, perKey(pub.took()))
	pub.mu.Lock()
	defer pub.mu.Unlock()
	assert.Less(t, len(pub.sizes), 80, "calls of several messages: %v", pub.sizes)
	assert.Equal(t, 80, sum(pub.sizes))
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

// TestRelayInterleavedRunReportsTheLowestUnpublished: a run whose records another run's
// record separates in the stream (a-2, a-9, a-1: run a-1 and run a-9 of one ordering key)
// is published in position order in the run's places (a-1, a-9, a-2), so a record moves
// later than records with higher sequence numbers. Wherever the key fails (at the record
// moved later, at the one moved earlier, at the other run's), the response names the
// lowest sequence number not published, never one past an unpublished record, and the
// redelivery from there publishes the rest, each event once.
func TestRelayInterleavedRunReportsTheLowestUnpublished(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failing string
		took    []string // published by the first delivery
	}{
		{failing: "a-2", took: []string{"a-1", "a-9"}}, // the record moved later (sequence 11)
		{failing: "a-1", took: nil},                    // the record moved earlier (13)
		{failing: "a-9", took: []string{"a-1"}},        // the other run's record (12)
	} {
		t.Run(tc.failing, func(t *testing.T) {
			t.Parallel()
			down := true
			pub := &recorder{fail: func(m outbox.Message, _ int) (bool, bool) { return down && m.ID == tc.failing, false }}
			r := newRelay(t, pub)
			batch := eventOf(
				insertRun("11", "a", "a-2", "s1", "a-1", 1),
				insertRun("12", "a", "a-9", "s2", "a-9", 0),
				insertRun("13", "a", "a-1", "s1", "a-1", 0),
			)
			resp, err := r.Handle(context.Background(), batch)
			require.NoError(t, err)
			assert.Equal(t, []string{"11"}, failures(resp), "a-2 (11) is not published: the key is delivered again from it")
			assert.Equal(t, tc.took, pub.took())

			down = false
			resp, err = r.Handle(context.Background(), batch) // Lambda delivers the shard from 11 on
			require.NoError(t, err)
			assert.Empty(t, resp.BatchItemFailures)
			assert.Equal(t, []string{"a-1", "a-9", "a-2"}, pub.took(), "each event published once, run a-1 in its order")
		})
	}
}
