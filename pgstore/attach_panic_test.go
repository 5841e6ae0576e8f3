package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

// An attached write that panics after a statement of its own, inside the completion's
// transaction: the store rolls the transaction back on the way out (a deferred rollback)
// and returns its connection to the pool; the guard reads the record back and releases the
// key. Through Do the panic goes on to the caller; in Batch.Settle (the batch's outcomes
// completed in one transaction, on Settle's goroutine) it is the request's
// *idem.AttachPanicError and the other requests commit.

// panicAfter returns a write that adds n to account and then panics.
func panicAfter(l *ledger, account string, n int) pgstore.Write {
	add := l.add(account, n, false)
	return func(ctx context.Context, tx pgx.Tx) error {
		if err := add(ctx, tx); err != nil {
			return err
		}
		panic("the handler's bug, after a statement of its own")
	}
}

func TestAttachedWritePanicRollsBackAndReleases(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, nil)
	l := newLedger(t, pool)
	g, err := idem.New(s, "test", idem.WithScope("test"))
	require.NoError(t, err)

	t.Run("Do", func(t *testing.T) {
		var recovered any
		func() {
			defer func() { recovered = recover() }()
			_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "do"}, func(ctx context.Context) (int, error) {
				return 0, pgstore.Attach(ctx, panicAfter(l, "do", 1))
			})
		}()
		require.NotNil(t, recovered, "the panic goes on")
		assert.Zero(t, l.balance(t, "do"), "rolled back")
		assert.Zero(t, pool.Stat().AcquiredConns(), "no connection kept, no transaction open")
		_, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "do"}, func(ctx context.Context) (int, error) {
			return 0, pgstore.Attach(ctx, l.add("do", 1, false))
		})
		require.NoError(t, err, "the key was released")
		assert.False(t, replayed)
		assert.Equal(t, 1, l.balance(t, "do"))
	})

	t.Run("Settle", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		keys := []string{"a", "p", "b"}
		reqs := make([]idem.Request, len(keys))
		for i, k := range keys {
			reqs[i] = idem.Request{Key: k}
		}
		b := g.Claim(ctx, reqs)
		for i, k := range keys {
			w := l.add(k, 1, false)
			if k == "p" {
				w = panicAfter(l, k, 1)
			}
			_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (int, error) {
				return 0, pgstore.Attach(ctx, w)
			})
			require.NoError(t, err, "request %d waits for Settle", i)
		}
		errs := b.Settle(ctx)
		var ap *idem.AttachPanicError
		require.ErrorAs(t, errs[1], &ap)
		assert.Equal(t, "the handler's bug, after a statement of its own", fmt.Sprint(ap.Value))
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[2])
		assert.Equal(t, 1, l.balance(t, "a"), "committed once")
		assert.Equal(t, 1, l.balance(t, "b"), "committed once")
		assert.Zero(t, l.balance(t, "p"), "rolled back")
		assert.Zero(t, pool.Stat().AcquiredConns(), "no connection kept, no transaction open")
		_, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (int, error) { return 0, nil })
		require.NoError(t, err, "the key was released")
		assert.False(t, replayed)
	})
}
