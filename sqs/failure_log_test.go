package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a batch's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TestFailedMessageLogNamesStoredKey: the line of a message refused or failed by the
// guard names its stored key and the reason, never the raw key, so on-call finds the
// record (idemctl show --stored-key) from the logs.
func TestFailedMessageLogNamesStoredKey(t *testing.T) {
	t.Parallel()
	for _, batchClaims := range []bool{true, false} {
		for _, tc := range []struct {
			name    string
			reason  sqs.Reason
			fail    func(s *storetest.Faulty)
			bodies  []string // one batch per body; the last one's message fails
			holding bool     // another owner holds the key while the batch runs
		}{
			{name: "in flight", reason: sqs.ReasonInProgress, bodies: []string{"a"}, holding: true},
			{name: "payload mismatch", reason: sqs.ReasonPayloadMismatch, bodies: []string{"a", "b"}},
			{name: "lease lost", reason: sqs.ReasonLeaseLost, bodies: []string{"a"},
				fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) }},
			{name: "store down", reason: sqs.ReasonStore, bodies: []string{"a"},
				fail: func(s *storetest.Faulty) { s.Fail("claim", errors.New("store: connection refused"), false) }},
		} {
			t.Run(fmt.Sprintf("batch claims %v/%s", batchClaims, tc.name), func(t *testing.T) {
				t.Parallel()
				var logs syncBuffer
				store := storetest.NewFaulty(memstore.New())
				g, err := idem.New(store, "credit", idem.WithScope("credits"), idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
				require.NoError(t, err)
				if tc.holding {
					claimed, finish, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
					go func() {
						defer close(done)
						_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: rawKey, Fingerprint: []byte("a")},
							func(context.Context) (struct{}, error) { close(claimed); <-finish; return struct{}{}, nil })
					}()
					<-claimed
					t.Cleanup(func() { close(finish); <-done })
				}
				if tc.fail != nil {
					tc.fail(store)
				}
				h, err := sqs.New(g, func(context.Context, events.SQSMessage) error { return nil }, sqs.WithBatchClaims(batchClaims))
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var rep *sqs.Report
				for i, body := range tc.bodies {
					rep, err = h.Process(ctx, events.SQSEvent{Records: []events.SQSMessage{withKey(message(fmt.Sprintf("m-%d", i), body), rawKey)}})
					require.NoError(t, err)
				}
				require.Len(t, rep.Outcomes, 1)
				require.Equal(t, tc.reason, rep.Outcomes[0].Reason)

				stored, err := g.StoredKey(idem.Request{Key: rawKey})
				require.NoError(t, err)
				logs.mu.Lock()
				defer logs.mu.Unlock()
				var lines []map[string]any
				d := json.NewDecoder(bytes.NewReader(logs.buf.Bytes()))
				for d.More() {
					var rec map[string]any
					require.NoError(t, d.Decode(&rec))
					if rec[slog.MessageKey] == "sqs: message failed" {
						lines = append(lines, rec)
					}
				}
				require.Len(t, lines, 1, "one line for the failed message")
				assert.Equal(t, stored, lines[0]["stored_key"])
				assert.Equal(t, string(tc.reason), lines[0]["reason"])
				assert.Equal(t, fmt.Sprintf("m-%d", len(tc.bodies)-1), lines[0]["message_id"])
				assert.NotContains(t, logs.buf.String(), rawKey)
			})
		}
	}
}
