package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/jsonlines"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// Tests of handler.go: New, Handle and Process, and what they take from the guard.

func TestNewRejectsNilArguments(t *testing.T) {
	t.Parallel()
	guard, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	tests := []struct {
		name  string
		guard *idem.Guard
		fn    func(context.Context, events.SQSMessage) error
	}{
		{"nil guard", nil, newRecorder().handle},
		{"nil handler", guard, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := sqs.New(tc.guard, tc.fn)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Nil(t, h)
		})
	}
}

func TestInvalidEventFailsTheBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memBackend())
	ev := loadEvent(t, "sqs-invalid-no-message-id")
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	_, err = lambda.NewHandler(e.h.Handle).Invoke(context.Background(), payload)
	require.ErrorIs(t, err, sqs.ErrInvalidEvent)
	assert.Zero(t, e.rec.total(), "nothing ran")
}

// The handler reads the time left before the deadline on the guard's clock: with one
// second left on it, a message is not started, whatever the wall clock says.
func TestHandlerTakesTheGuardsClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	deadline, _ := ctx.Deadline()
	late := idem.ClockFunc(func() time.Time { return deadline.Add(-time.Second) })
	guard, err := idem.New(memstore.New(), "test", idem.WithClock(late))
	require.NoError(t, err)
	rec := newRecorder()
	h, err := sqs.New(guard, rec.handle, sqs.WithDeadlineMargin(5*time.Second))
	require.NoError(t, err)

	rep, err := h.Process(ctx, events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}")}})
	require.NoError(t, err)
	assert.Equal(t, sqs.ReasonNotStarted, rep.Outcomes[0].Reason)
	assert.Zero(t, rec.total(), "nothing ran")
}

// The handler writes its lines to the guard's logger.
func TestHandlerLogsToTheGuardsLogger(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	guard, err := idem.New(memstore.New(), "test", idem.WithLogger(slog.New(slog.NewJSONHandler(&out, nil))))
	require.NoError(t, err)
	h, err := sqs.New(guard, newRecorder().handle)
	require.NoError(t, err)

	_, err = h.Process(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}")}})
	require.NoError(t, err)
	assert.Contains(t, out.String(), `"msg":"sqs: batch processed"`)
}

// The guard's OnBatch hook gets each batch's report, once, as an idem.BatchEvent: every
// message's ID, status, reason and error, the counts, FIFO and the duration; and nothing
// for an event that could not be processed.
func TestOnBatchMirrorsTheReport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		event string
		fail  int // the record whose handler fails
		fifo  bool
	}{
		{"standard", "sqs-standard-same-key", 2, false}, // 0, 1, 3 and 4 share a key and a body
		{"FIFO", "sqs-fifo-two-groups", 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []idem.BatchEvent
			clock := storetest.NewClock()
			guard, err := idem.New(memstore.New(), "test", idem.WithClock(clock), idem.WithHooks(idem.Hooks{
				OnBatch: func(_ context.Context, e idem.BatchEvent) { got = append(got, e) },
			}))
			require.NoError(t, err)
			rec := newRecorder()
			rec.before = func(context.Context, events.SQSMessage) { clock.Advance(time.Millisecond) }
			h, err := sqs.New(guard, rec.handle, sqs.WithConcurrency(1))
			require.NoError(t, err)
			ev := loadEvent(t, tc.event)
			rec.setFail(ev.Records[tc.fail].MessageId, errors.New("ledger: account frozen"))

			for run := range 2 { // the second run replays what succeeded
				rep, err := h.Process(context.Background(), ev)
				require.NoError(t, err)
				require.Len(t, got, run+1, "one event per batch")
				e := got[run]
				assert.Equal(t, tc.fifo, e.FIFO)
				assert.Equal(t, rep.FIFO, e.FIFO)
				assert.Equal(t, [4]int{rep.Ran, rep.Replayed, rep.Duplicates, rep.Failed}, [4]int{e.Ran, e.Replayed, e.Duplicates, e.Failed})
				assert.Equal(t, rep.Duration, e.Duration)
				assert.Positive(t, e.Duration, "timed on the guard's clock")
				require.Len(t, e.Items, len(ev.Records))
				for i, o := range rep.Outcomes {
					it := e.Items[i]
					assert.Equal(t, ev.Records[i].MessageId, it.ID)
					assert.Equal(t, o.MessageID, it.ID)
					assert.Equal(t, string(o.Status), it.Status, it.ID)
					assert.Equal(t, string(o.Reason), it.Reason, it.ID)
					assert.Equal(t, o.Err, it.Err, it.ID)
				}
				assert.Positive(t, e.Failed, "the failure is in the event")
			}
			assert.Positive(t, got[1].Replayed, "the second run replayed")

			_, err = h.Process(context.Background(), loadEvent(t, "sqs-invalid-no-message-id"))
			require.ErrorIs(t, err, sqs.ErrInvalidEvent)
			assert.Len(t, got, 2, "no event for an unusable batch")
		})
	}
}

// At WARN, an operator sees one line per failed message saying which and why, and never
// its key or body.
func TestFailedMessageLogLines(t *testing.T) {
	t.Parallel()
	const (
		secretKey  = "customer-4711@example.com"
		secretBody = `{"card":"4111111111111111"}`
	)
	tests := []struct {
		name string
		opts []sqs.Option
	}{
		{"batch claims", nil},
		{"per message", []sqs.Option{sqs.WithBatchClaims(false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
			guard, err := idem.New(memstore.New(), "test", idem.WithLogger(logger))
			require.NoError(t, err)
			h, err := sqs.New(guard, func(_ context.Context, m events.SQSMessage) error {
				switch m.MessageId {
				case "m-fails":
					return errors.New("ledger: account frozen")
				case "m-panics":
					panic("ledger corrupted")
				}
				return nil
			}, tc.opts...)
			require.NoError(t, err)

			ev := events.SQSEvent{Records: []events.SQSMessage{
				withKey(message("m-ok", secretBody), secretKey+"-1"),
				withKey(message("m-fails", secretBody), secretKey+"-2"),
				withKey(message("m-panics", secretBody), secretKey+"-3"),
			}}
			_, err = h.Handle(context.Background(), ev)
			require.NoError(t, err)

			assert.NotContains(t, out.String(), secretKey)
			assert.NotContains(t, out.String(), "4111111111111111")
			byMessage := map[string]map[string]any{}
			var summaries int
			for _, l := range jsonlines.Parse(t, out.Bytes()) {
				if l["msg"] == "sqs: batch processed" {
					summaries++
					continue
				}
				id, _ := l["message_id"].(string)
				require.NotEmpty(t, id, "a per-message line names its message: %v", l)
				require.NotContains(t, byMessage, id, "one line per failed message")
				byMessage[id] = l
			}
			assert.Equal(t, 1, summaries)
			require.Len(t, byMessage, 2, "a line for each failed message, none for m-ok")
			assert.Equal(t, "WARN", byMessage["m-fails"]["level"])
			assert.Equal(t, "sqs: message failed", byMessage["m-fails"]["msg"])
			assert.Equal(t, string(sqs.ReasonHandler), byMessage["m-fails"]["reason"])
			assert.Equal(t, "ERROR", byMessage["m-panics"]["level"], "a panic is a bug")
			assert.Contains(t, byMessage["m-panics"], "stack")
		})
	}
}
