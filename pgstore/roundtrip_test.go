package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// TestRoundTrips counts the statements each path of a guarded call sends, through a
// counting wrapper around the pool: the budget of the package documentation, counted.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	cases := []struct {
		name string
		// prepare runs first, uncounted; call is counted.
		prepare func(t *testing.T, g *idem.Guard, l *ledger) func()
		call    func(g *idem.Guard, l *ledger) error
		want    map[string]int
	}{
		{
			name: "NewKey",
			call: func(g *idem.Guard, _ *ledger) error { return do(ctx, g, nil) },
			// claim, complete (a query: it tells a lost lease from a resend)
			want: map[string]int{"query": 1, "exec": 1}, // claim, completion
		},
		{
			name:    "Replay",
			prepare: func(t *testing.T, g *idem.Guard, _ *ledger) func() { require.NoError(t, do(ctx, g, nil)); return nil },
			call:    func(g *idem.Guard, _ *ledger) error { return do(ctx, g, nil) },
			want:    map[string]int{"query": 1},
		},
		{
			name:    "InFlight",
			prepare: holdKey,
			call: func(g *idem.Guard, _ *ledger) error {
				if err := do(ctx, g, nil); !errors.Is(err, idem.ErrInProgress) {
					return errors.New("want ErrInProgress")
				}
				return nil
			},
			want: map[string]int{"query": 1},
		},
		{
			name: "NewKeyWithAttachedWrite",
			call: func(g *idem.Guard, l *ledger) error {
				return do(ctx, g, func(ctx context.Context) error { return pgstore.Attach(ctx, l.add("acct", 1, false)) })
			},
			// claim; BEGIN, the completion, the business write, COMMIT
			want: map[string]int{"query": 2, "begin": 1, "exec": 1, "commit": 1},
		},
		{
			name: "HandlerFails",
			call: func(g *idem.Guard, _ *ledger) error {
				if err := do(ctx, g, func(context.Context) error { return boom }); !errors.Is(err, boom) {
					return errors.New("want the handler's error")
				}
				return nil
			},
			want: map[string]int{"query": 1, "exec": 1}, // claim, release
		},
		{
			name: "Checkpoint",
			call: func(g *idem.Guard, _ *ledger) error {
				return do(ctx, g, func(ctx context.Context) error { return idem.Checkpoint(ctx, "step") })
			},
			want: map[string]int{"query": 1, "exec": 2}, // claim, checkpoint, complete
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCounter(nil)
			s, pool := newStore(t, c)
			c.db = pool
			g, err := idem.New(s, "rt", idem.WithScope("test"), idem.WithLease(time.Minute))
			require.NoError(t, err)
			l := newLedger(t, pool)
			if tc.prepare != nil {
				if stop := tc.prepare(t, g, l); stop != nil {
					defer stop()
				}
			}
			c.take()
			require.NoError(t, tc.call(g, l))
			assert.Equal(t, tc.want, c.take())
		})
	}
}

// do runs a guarded call of the key "k" whose handler runs work, if not nil.
func do(ctx context.Context, g *idem.Guard, work func(context.Context) error) error {
	_, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (out, error) {
		if work == nil {
			return out{N: 1}, nil
		}
		return out{N: 1}, work(ctx)
	})
	return err
}

// holdKey starts a call of "k" that holds its lease until the returned function is called.
func holdKey(t *testing.T, g *idem.Guard, _ *ledger) func() {
	t.Helper()
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- do(context.Background(), g, func(context.Context) error { close(started); <-release; return nil })
	}()
	<-started
	return func() { close(release); require.NoError(t, <-done) }
}
