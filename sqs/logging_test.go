package sqs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/jsonlines"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

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
