package lambdawrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// completeFailStore is a working store whose first completions fail with err, as a
// DynamoDB that stops answering after the claim, or a cancelled transaction, would.
type completeFailStore struct {
	idemstore.Store
	err   error
	fails atomic.Int64 // completions left to fail
}

func newCompleteFailStore(store idemstore.Store, err error, fails int64) *completeFailStore {
	s := &completeFailStore{Store: store, err: err}
	s.fails.Store(fails)
	return s
}

func (s *completeFailStore) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if s.fails.Add(-1) >= 0 {
		return s.err
	}
	return s.Store.Complete(ctx, rec, attached)
}

// logRecords collects what a slog.Logger writes, as JSON objects.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecords) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// levels returns the level of every record written.
func (l *logRecords) levels(t testing.TB) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	d := json.NewDecoder(bytes.NewReader(l.buf.Bytes()))
	for d.More() {
		var rec map[string]any
		require.NoError(t, d.Decode(&rec))
		out = append(out, fmt.Sprint(rec[slog.LevelKey]))
	}
	return out
}

// TestCompletionFailed: when the store fails to record the outcome after the handler ran,
// the client gets the handler's own response (its effects happened), never a claim that
// the store was down and nothing ran; the failure is logged at ERROR. The key stays in
// progress until its lease ends.
func TestCompletionFailed(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		var logs logRecords
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, newCompleteFailStore(store, errUnavailable, 1<<30), idem.WithLogger(logs.logger())))
		ctx := invokeCtx(t)

		first := invoke(ctx, t, h, ev)
		require.NoError(t, first.err)
		assert.Equal(t, 201, first.code, "the handler's response, body %s", first.body(t))
		assert.Empty(t, first.header(lambdawrap.ReplayedHeader))
		assert.Contains(t, first.body(t), "ord-0001")
		assert.Equal(t, []string{"ERROR"}, logs.levels(t))

		// The outcome was not recorded: until the lease ends, a retry is in progress.
		retry := invoke(ctx, t, h, ev)
		require.NoError(t, retry.err)
		assert.Equal(t, 409, retry.code)
		assert.Equal(t, lambdawrap.ProblemInProgress, retry.problem(t)["type"])
		assert.Equal(t, int64(1), a.runs.Load())
	})
}

// TestCompletionNotCommitted: when the store commits nothing (a cancelled transaction),
// the key is released, the client gets 503 with Retry-After saying so, and a retry runs
// the handler again.
func TestCompletionNotCommitted(t *testing.T) {
	t.Parallel()
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, newCompleteFailStore(store, notCommitted, 1)))
		ctx := invokeCtx(t)

		first := invoke(ctx, t, h, ev)
		require.NoError(t, first.err)
		assert.Equal(t, 503, first.code)
		assert.Equal(t, "1", first.header("Retry-After"))
		assert.Equal(t, "application/problem+json", first.header("Content-Type"))
		assert.Equal(t, lambdawrap.ProblemNotCommitted, first.problem(t)["type"])

		retry := invoke(ctx, t, h, ev)
		require.NoError(t, retry.err)
		assert.Equal(t, 201, retry.code)
		assert.Empty(t, retry.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, int64(2), a.runs.Load())
	})
}

// TestWrapCompletionFailed: the generic wrapper returns the handler's result when its
// outcome could not be recorded, so Lambda does not retry work that happened; when nothing
// committed, it returns the error, and the retry runs again.
func TestWrapCompletionFailed(t *testing.T) {
	t.Parallel()
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	tests := []struct {
		name    string
		err     error
		wantErr error // of the first invocation
		// retryInProgress: the retry finds the key in progress; otherwise it runs again.
		retryInProgress bool
		runs            int64
	}{
		{name: "completion failed", err: errUnavailable, retryInProgress: true, runs: 1},
		{name: "not committed", err: notCommitted, wantErr: idemstore.ErrNotCommitted, runs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logRecords
			c := &charger{}
			key, err := lambdawrap.KeyFromJMESPath[payment]("payment_id")
			require.NoError(t, err)
			fails := int64(1) // a verdict: the guard does not send it again
			if tc.err == errUnavailable {
				fails = 1 << 30 // every resend fails too
			}
			g := newGuard(t, newCompleteFailStore(memstore.New(), tc.err, fails), idem.WithLogger(logs.logger()))
			h, err := lambdawrap.Wrap(g, c.charge, key)
			require.NoError(t, err)
			lh := invoker{h: h}
			ctx := invokeCtx(t)
			payload := []byte(`{"payment_id":"p-9","customer_id":"c-1","amount":250}`)

			out, err := lh.Invoke(ctx, payload)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				assert.JSONEq(t, `{"receipt":"rcpt-p-9","run":1}`, string(out))
				assert.Equal(t, []string{"ERROR"}, logs.levels(t))
			}

			_, err = lh.Invoke(ctx, payload)
			if tc.retryInProgress {
				require.ErrorIs(t, err, idem.ErrInProgress)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.runs, c.runs.Load())
		})
	}
}

// unreadableStore fails every completion and every read: the outcome of a completion
// cannot be learnt.
type unreadableStore struct{ *completeFailStore }

func (s unreadableStore) Get(context.Context, string) (*idemstore.Record, error) {
	return nil, errUnavailable
}

// TestCompletionWithAttachedWritesUnknown: when a completion with attached writes fails and
// its outcome cannot be read back, the writes may or may not have committed, so the
// handler's response (an order id that may not exist) is not the truth: the client gets
// 503 ProblemOutcomeUnknown, and a retry after the lease either replays the committed
// response or runs again where nothing committed.
func TestCompletionWithAttachedWritesUnknown(t *testing.T) {
	t.Parallel()
	var logs logRecords
	var runs atomic.Int64
	handler := func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		n := runs.Add(1)
		if err := idem.Attach(ctx, func() error { return nil }); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"order":"ord-%d"}`, n)}, nil
	}
	store := unreadableStore{newCompleteFailStore(memstore.New(), errUnavailable, 1<<30)}
	h, err := lambdawrap.HTTPAPI(newGuard(t, store, idem.WithLogger(logs.logger())), handler)
	require.NoError(t, err)
	ev := loadEvent(t, "apigw-v2-post-with-key")

	first := invoke(invokeCtx(t), t, invoker{h: h}, ev)
	require.NoError(t, first.err)
	assert.Equal(t, 503, first.code, "body %s", first.body(t))
	assert.Equal(t, lambdawrap.ProblemOutcomeUnknown, first.problem(t)["type"])
	assert.NotEmpty(t, first.header("Retry-After"))
	assert.NotContains(t, first.body(t), "ord-1", "an order that may not exist is never announced")
	assert.Equal(t, []string{"ERROR"}, logs.levels(t))
	assert.Equal(t, int64(1), runs.Load())
}
