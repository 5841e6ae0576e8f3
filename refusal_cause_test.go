package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// fundsError is a business write's own refusal, as a store's typed error would carry it.
type fundsError struct{ account string }

func (e *fundsError) Error() string { return "insufficient funds on " + e.account }

// syncBuffer is a log destination safe for the guard's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRefusedWriteCauseReachesEveryEvent: an attached write refused by the store keeps its
// cause reachable with errors.As from Do's error and from the hook events, and the guard
// logs it once at WARN, naming the stored key, never the raw key or the error's text.
func TestRefusedWriteCauseReachesEveryEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// refuse is the attached write's error.
		refuse error
		// retryable says whether the store's error says nothing committed (a retryable
		// refusal) rather than a condition failed.
		retryable bool
	}{
		{name: "condition failed", refuse: &fundsError{account: "acct-secret-42"}},
		{name: "not committed", refuse: &fundsError{account: "acct-secret-42"}, retryable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			var mu sync.Mutex
			events := map[string][]idem.Event{}
			record := func(name string) func(context.Context, idem.Event) {
				return func(_ context.Context, e idem.Event) {
					mu.Lock()
					events[name] = append(events[name], e)
					mu.Unlock()
				}
			}
			g, err := idem.New(&memstore.Store{}, "pay",
				idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
				idem.WithHooks(idem.Hooks{OnReleased: record("released"), OnStoreError: record("store"), OnCompleted: record("completed")}))
			require.NoError(t, err)
			req := idem.Request{Key: "raw-key-7"}
			_, _, err = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
				return "201", idem.Attach(ctx, func() error {
					if tc.retryable {
						return errors.Join(idemstore.ErrNotCommitted, tc.refuse)
					}
					return tc.refuse
				})
			})
			var fe *fundsError
			require.ErrorAs(t, err, &fe, "Do's error")
			if tc.retryable {
				assert.ErrorIs(t, err, idemstore.ErrNotCommitted)
			} else {
				assert.ErrorIs(t, err, idem.ErrConditionFailed)
			}

			mu.Lock()
			released := events["released"]
			mu.Unlock()
			require.Len(t, released, 1, "the key is released")
			assert.ErrorAs(t, released[0].Err, &fe, "OnReleased's event")
			assert.Empty(t, events["completed"])

			stored, err := g.StoredKey(req)
			require.NoError(t, err)
			warns := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") {
					warns++
					assert.Contains(t, line, stored, "the stored key")
				}
			}
			assert.Equal(t, 1, warns, "one WARN line:\n%s", logs.String())
			assert.NotContains(t, logs.String(), "raw-key-7", "never the raw key")
			if !tc.retryable {
				// A store failure's text is logged as it is; a write's own error is not.
				assert.NotContains(t, logs.String(), "acct-secret-42", "never the write's values")
			}
		})
	}
}

// releaseFails is a memstore whose Release fails.
type releaseFails struct{ idemstore.Store }

func (releaseFails) Release(context.Context, string, string, time.Time) error { return errConnReset }

// TestRefusedWriteCauseReachableWhenTheReleaseFails: when the release that fences off the
// refused completion fails, Do's error (Op OpCommit) no longer says nothing committed, but
// errors.As still reaches the write's cause.
func TestRefusedWriteCauseReachableWhenTheReleaseFails(t *testing.T) {
	t.Parallel()
	g, err := idem.New(releaseFails{&memstore.Store{}}, "pay")
	require.NoError(t, err)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		return "201", idem.Attach(ctx, func() error { return &fundsError{account: "a"} })
	})
	var se *idem.StoreError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, idem.OpCommit, se.Op)
	assert.NotErrorIs(t, err, idem.ErrConditionFailed, "whether it committed is unknown")
	assert.False(t, idem.IsRefused(err))
	var fe *fundsError
	assert.ErrorAs(t, err, &fe)
}
