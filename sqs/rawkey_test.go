package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/capture"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// rawKey is a producer's key distinctive enough to be found in any output it reaches.
const rawKey = "RAWKEY-7f3a9c2e-never-logged"

// TestRawKeyNeverLogged drives every failure reason of the handler, on the batch path and
// the per-message path, with messages keyed by a distinctive raw key, the guard logging
// everything at DEBUG and every hook (OnBatch included) reporting, and finds the key in
// none of it: lines and events name messages by their IDs, never by their keys. Each case
// checks the reasons reported, so that the path was taken.
func TestRawKeyNeverLogged(t *testing.T) {
	t.Parallel()
	errDown := errors.New("store: connection refused")
	errHandler := errors.New("app: credit failed")
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	const fifoARN = "arn:aws:sqs:eu-west-1:123456789012:credits.fifo"
	keyed := func(id, key, body string) events.SQSMessage { return withKey(message(id, body), key) }
	ok := func(context.Context, events.SQSMessage) error { return nil }
	fails := func(context.Context, events.SQSMessage) error { return errHandler }
	tests := []struct {
		name  string
		guard []idem.Option
		opts  []sqs.Option
		fail  func(s *storetest.Faulty)
		fn    func(context.Context, events.SQSMessage) error
		// batches are processed in order, under ctx; want is the reasons of the last one's
		// messages.
		batches [][]events.SQSMessage
		ctx     func(t *testing.T) context.Context
		before  func(t *testing.T, g *idem.Guard) // runs before the batches
		want    []sqs.Reason
	}{
		{name: "handler error", fn: fails, batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}},
			want: []sqs.Reason{sqs.ReasonHandler}},
		{name: "handler panics", fn: func(context.Context, events.SQSMessage) error { panic("app: " + "boom") },
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}}, want: []sqs.Reason{sqs.ReasonPanic}},
		{name: "handler error, release fails", fn: fails, fail: func(s *storetest.Faulty) { s.Fail("release", errDown, false) },
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}}, want: []sqs.Reason{sqs.ReasonHandler}},
		{name: "payload mismatch", fn: ok,
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}, {keyed("m-2", rawKey, "b")}},
			want:    []sqs.Reason{sqs.ReasonPayloadMismatch}},
		{name: "key too long", fn: ok, batches: [][]events.SQSMessage{{keyed("m-1", rawKey+strings.Repeat("x", idem.MaxKeyLength), "a")}},
			want: []sqs.Reason{sqs.ReasonKey}},
		{name: "two key attributes disagree", fn: ok, batches: [][]events.SQSMessage{{func() events.SQSMessage {
			m := keyed("m-1", rawKey, "a")
			other := rawKey + "-2"
			m.MessageAttributes["idempotency-key"] = events.SQSMessageAttribute{StringValue: &other, DataType: "String"}
			return m
		}()}}, want: []sqs.Reason{sqs.ReasonKey}},
		{name: "store down", fn: ok, fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) },
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a"), keyed("m-2", rawKey+"-2", "a")}},
			want:    []sqs.Reason{sqs.ReasonStore, sqs.ReasonStore}},
		{name: "completion fails", fn: ok, fail: func(s *storetest.Faulty) { s.Fail("complete", errDown, false) },
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}}, want: []sqs.Reason{sqs.ReasonStore}},
		{name: "completion not committed", fn: ok, fail: func(s *storetest.Faulty) { s.Fail("complete", notCommitted, false) },
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}}, want: []sqs.Reason{sqs.ReasonStore}},
		{name: "completion finds the lease lost", fn: ok, fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) },
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}}, want: []sqs.Reason{sqs.ReasonLeaseLost}},
		{name: "duplicate in the batch fails", fn: fails,
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a"), keyed("m-2", rawKey, "a")}},
			want:    []sqs.Reason{sqs.ReasonHandler, sqs.ReasonDuplicateFailed}},
		{name: "FIFO group stopped", fn: fails,
			batches: [][]events.SQSMessage{{fifo(keyed("m-1", rawKey, "a"), fifoARN), fifo(keyed("m-2", rawKey+"-2", "b"), fifoARN)}},
			want:    []sqs.Reason{sqs.ReasonHandler, sqs.ReasonGroupStopped}},
		{name: "not started near the deadline", fn: ok, opts: []sqs.Option{sqs.WithDeadlineMargin(time.Hour)},
			batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}}, want: []sqs.Reason{sqs.ReasonNotStarted}},
		{name: "in progress elsewhere", fn: ok, batches: [][]events.SQSMessage{{keyed("m-1", rawKey, "a")}},
			before: func(t *testing.T, g *idem.Guard) {
				claimed, finish := make(chan struct{}), make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: rawKey, Fingerprint: []byte("a")},
						func(context.Context) (struct{}, error) { close(claimed); <-finish; return struct{}{}, nil })
				}()
				<-claimed
				t.Cleanup(func() { close(finish); <-done })
			},
			want: []sqs.Reason{sqs.ReasonInProgress}},
	}
	for _, batchClaims := range []bool{true, false} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("batch claims %v/%s", batchClaims, tc.name), func(t *testing.T) {
				t.Parallel()
				var out capture.Output
				store := storetest.NewFaulty(memstore.New())
				g, err := idem.New(store, "credit", append(out.Options(), tc.guard...)...)
				require.NoError(t, err)
				if tc.before != nil {
					tc.before(t, g)
				}
				if tc.fail != nil {
					tc.fail(store)
				}
				h, err := sqs.New(g, tc.fn, append([]sqs.Option{sqs.WithBatchClaims(batchClaims)}, tc.opts...)...)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var rep *sqs.Report
				for _, b := range tc.batches {
					rep, err = h.Process(ctx, events.SQSEvent{Records: b})
					require.NoError(t, err)
				}
				var got []sqs.Reason
				for _, o := range rep.Outcomes {
					got = append(got, o.Reason)
					out.Error(o.Err)
				}
				assert.Equal(t, tc.want, got)
				assert.Regexp(t, `"msg":"sqs: message (failed|handler panicked)"`, out.String(), "the failure was logged")
				assert.Contains(t, out.String(), "hook OnBatch", "the batch was reported")
				assert.NotContains(t, out.String(), rawKey)
			})
		}
	}
}

// fifo makes m a message of a FIFO queue, in group "g".
func fifo(m events.SQSMessage, arn string) events.SQSMessage {
	m.EventSourceARN = arn
	return withGroup(m, "g")
}
