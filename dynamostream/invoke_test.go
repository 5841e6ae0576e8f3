package dynamostream_test

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/memstore"
)

// loadEvent reads testdata/name.json.
func loadEvent(t testing.TB, name string) events.DynamoDBEvent {
	t.Helper()
	return adaptertest.Load[events.DynamoDBEvent](t, name)
}

// invoke sends ev through the Lambda runtime's JSON handler, as Lambda would, and returns
// the raw response.
func invoke(t testing.TB, h *dynamostream.Handler, ev events.DynamoDBEvent) []byte {
	t.Helper()
	out, err := adaptertest.Invoke(t, context.Background(), h.Handle, ev)
	require.NoError(t, err)
	return out
}

// retryFrom returns what Lambda delivers after a partial response: the shard's records
// from the lowest reported sequence number on.
func retryFrom(t testing.TB, ev events.DynamoDBEvent, reported []string) events.DynamoDBEvent {
	t.Helper()
	var low *big.Int
	for _, s := range reported {
		n, ok := new(big.Int).SetString(s, 10)
		require.True(t, ok, s)
		if low == nil || n.Cmp(low) < 0 {
			low = n
		}
	}
	for i, r := range ev.Records {
		if low != nil && r.Change.SequenceNumber == low.String() {
			return events.DynamoDBEvent{Records: ev.Records[i:]}
		}
	}
	return events.DynamoDBEvent{}
}

// projection applies each change once per run, and fails the changes named in fail.
type projection struct {
	mu      sync.Mutex
	applied map[string]int // eventID → times applied
	order   []string       // "<order_id>:<eventName>:<status>" in the order applied
	fail    map[string]bool
}

func (p *projection) apply(_ context.Context, r events.DynamoDBEventRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail[r.EventID] {
		return errors.New("projection unavailable")
	}
	if p.applied == nil {
		p.applied = map[string]int{}
	}
	p.applied[r.EventID]++
	p.order = append(p.order, r.Change.Keys["order_id"].String()+":"+r.EventName+":"+r.Change.NewImage["status"].String())
	return nil
}

// TestFixtureFirstFailurePerItem drives the fixture through the Lambda runtime: o-1's
// MODIFY to PAID fails, so o-1's later change is not started and only the failed record's
// sequence number is reported; Lambda delivers the shard again from it, and every change
// is applied exactly once, each item's in order.
func TestFixtureFirstFailurePerItem(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{1, 4} {
		t.Run(map[int]string{1: "sequential", 4: "concurrent"}[concurrency], func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, "dynamodb-orders-three-items")
			g, err := idem.New(memstore.New(), "orders-projection")
			require.NoError(t, err)
			p := &projection{fail: map[string]bool{ev.Records[2].EventID: true}}
			h, err := dynamostream.New(g, p.apply, dynamostream.WithConcurrency(concurrency))
			require.NoError(t, err)

			out := invoke(t, h, ev)
			adaptertest.Golden(t, "dynamodb-orders-three-items-third-fails", out)
			reported := adaptertest.Failures(t, out)
			assert.Equal(t, []string{ev.Records[2].Change.SequenceNumber}, reported)
			assert.Zero(t, p.applied[ev.Records[3].EventID], "o-1's change after the failure is not started")

			p.fail = nil
			retry := retryFrom(t, ev, reported)
			require.Len(t, retry.Records, 4)
			assert.Empty(t, adaptertest.Failures(t, invoke(t, h, retry)))
			for _, r := range ev.Records {
				assert.Equal(t, 1, p.applied[r.EventID], "change %s applied once", r.EventID)
			}
			var o1 []string
			for _, s := range p.order {
				if s[:3] == "o-1" {
					o1 = append(o1, s)
				}
			}
			assert.Equal(t, []string{"o-1:INSERT:NEW", "o-1:MODIFY:PAID", "o-1:MODIFY:SHIPPED"}, o1)
		})
	}
}

// TestFixtureAWSLambdaGo: aws-lambda-go's own DynamoDB Streams test event runs each
// record once, and its redelivery replays every one.
func TestFixtureAWSLambdaGo(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "example")
	require.NoError(t, err)
	p := &projection{}
	h, err := dynamostream.New(g, p.apply)
	require.NoError(t, err)
	ev := loadEvent(t, "dynamodb-aws-lambda-go")
	assert.Empty(t, adaptertest.Failures(t, invoke(t, h, ev)))
	rep, err := h.Process(adaptertest.Context(t), ev)
	require.NoError(t, err)
	assert.Equal(t, len(ev.Records), rep.Replayed)
	for _, r := range ev.Records {
		assert.Equal(t, 1, p.applied[r.EventID])
	}
}

// TestKeyJMESPath: a key from the decoded record; numbers keep their digits.
func TestKeyJMESPath(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, "dynamodb-orders-three-items")
	for _, tc := range []struct {
		expr string
		want string
	}{
		{"Keys.order_id", "o-1"},
		{"[Keys.order_id, NewImage.amount_cents]", `["o-1",500]`},
		{"eventName", "INSERT"},
	} {
		g, err := idem.New(memstore.New(), "keys")
		require.NoError(t, err)
		h, err := dynamostream.New(g, func(context.Context, events.DynamoDBEventRecord) error { return nil }, dynamostream.WithKeyJMESPath(tc.expr))
		require.NoError(t, err)
		rep, err := h.Process(adaptertest.Context(t), events.DynamoDBEvent{Records: ev.Records[:1]})
		require.NoError(t, err)
		assert.Equal(t, tc.want, rep.Outcomes[0].Key, tc.expr)
	}
}

// TestInvalidEvent: a record without a sequence number cannot be reported, so the whole
// batch fails and Lambda retries it; a record without Keys fails alone.
func TestInvalidEvent(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "invalid")
	require.NoError(t, err)
	h, err := dynamostream.New(g, func(context.Context, events.DynamoDBEventRecord) error { return nil })
	require.NoError(t, err)
	ev := loadEvent(t, "dynamodb-orders-three-items")
	ev.Records[1].Change.SequenceNumber = ""
	_, err = h.Handle(adaptertest.Context(t), ev)
	require.ErrorIs(t, err, dynamostream.ErrInvalidEvent)

	ev = loadEvent(t, "dynamodb-orders-three-items")
	ev.Records[1].Change.Keys = nil
	rep, err := h.Process(adaptertest.Context(t), ev)
	require.NoError(t, err)
	assert.Equal(t, dynamostream.Reason("key"), rep.Outcomes[1].Reason)
	assert.Equal(t, []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[1].Change.SequenceNumber}}, rep.Response().BatchItemFailures)
}

// TestOptions: invalid settings fail New with an error naming the option.
func TestOptions(t *testing.T) {
	t.Parallel()
	adaptertest.OptionErrors(t, dynamostream.New, func(context.Context, events.DynamoDBEventRecord) error { return nil }, map[string]dynamostream.Option{
		"WithConcurrency":    dynamostream.WithConcurrency(0),
		"WithKey":            dynamostream.WithKey(nil),
		"WithFingerprint":    dynamostream.WithFingerprint(nil),
		"WithDeadlineMargin": dynamostream.WithDeadlineMargin(-time.Second),
		"WithKeyJMESPath":    dynamostream.WithKeyJMESPath("["),
	})
}

// TestOrderingKeyShard: with one ordering key for every record, the shard is one group: no
// record after a failure runs, whatever its item, and the failure alone is reported.
func TestOrderingKeyShard(t *testing.T) {
	t.Parallel()
	ev := loadEvent(t, "dynamodb-orders-three-items")
	g, err := idem.New(memstore.New(), "projection")
	require.NoError(t, err)
	p := &projection{fail: map[string]bool{ev.Records[2].EventID: true}}
	shard := func(events.DynamoDBEventRecord) string { return "shard" }
	h, err := dynamostream.New(g, p.apply, dynamostream.WithOrderingKey(shard))
	require.NoError(t, err)
	assert.Equal(t, []string{ev.Records[2].Change.SequenceNumber}, adaptertest.Failures(t, invoke(t, h, ev)))
	assert.Equal(t, []string{"o-1:INSERT:NEW", "o-2:INSERT:NEW"}, p.order, "nothing after the failure ran")
	_, err = dynamostream.New(g, p.apply, dynamostream.WithOrderingKey(nil))
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}
