package pgstore_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// cutter is a connection that, once armed, closes itself right after it has sent a
// message holding a given text: the server gets the message, the client never its reply
// (a response lost, a connection killed mid-pipeline).
type cutter struct {
	net.Conn
	armed *atomic.Pointer[[]byte]
	cut   *atomic.Bool
}

func (c cutter) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if p := c.armed.Load(); p != nil && bytes.Contains(b, *p) && c.armed.CompareAndSwap(p, nil) {
		c.cut.Store(true)
		_ = c.Conn.Close()
	}
	return n, err
}

// execStore returns a store in QueryExecModeExec, where the completion with attached writes
// goes with BEGIN, on a fresh table, and a ledger; armed, when set to a text, cuts the
// store's connection after the next message holding it.
func execStore(t *testing.T) (s *pgstore.Store, l *ledger, armed *atomic.Pointer[[]byte], cut *atomic.Bool) {
	t.Helper()
	armed, cut = &atomic.Pointer[[]byte]{}, &atomic.Bool{}
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return cutter{conn, armed, cut}, nil
		}
	})
	s, plain := newStore(t, pool)
	return s, newLedger(t, plain), armed, cut
}

// TestCompletionWithBegin checks the completion with attached writes that goes with BEGIN
// (pgx modes that prepare nothing): its values reach the record as they would as
// parameters, whatever quotes, backslashes or bytes they hold; a resend of a completion
// that committed runs no write and succeeds; an owner whose lease was taken over gets
// ErrLeaseLost and runs no write; and a connection cut after BEGIN and the completion were
// sent commits nothing, says so (ErrNotCommitted), and leaves the record to a resend,
// which commits the writes once.
func TestCompletionWithBegin(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()
	claim := func(t *testing.T, s *pgstore.Store, key, token string) *idemstore.Record {
		t.Helper()
		rec := &idemstore.Record{Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
			LeaseExpires: now.Add(time.Minute), LeaseToken: token, Version: idemstore.SchemaVersion}
		_, claimed, err := s.Claim(ctx, rec, now)
		require.NoError(t, err)
		require.True(t, claimed)
		done := *rec
		done.Status, done.LeaseExpires = idemstore.StatusCompleted, time.Time{}
		done.Expires = now.Add(2*time.Hour + 123456789*time.Nanosecond)
		return &done
	}
	var ran atomic.Int64
	counted := func(w pgstore.Write) pgstore.Write {
		return func(ctx context.Context, tx pgx.Tx) error { ran.Add(1); return w(ctx, tx) }
	}

	t.Run("values", func(t *testing.T) {
		s, l, _, _ := execStore(t)
		data := make([]byte, 256)
		for i := range data {
			data[i] = byte(i)
		}
		rec := claim(t, s, `k'e\y\\''`, `t'o\k`)
		rec.Data, rec.Encoding, rec.Fingerprint = data, `e'n\c`, `f\'p`
		require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}))
		got, err := s.Get(ctx, rec.Key)
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusCompleted, got.Status)
		assert.Equal(t, data, got.Data)
		assert.Equal(t, rec.Encoding, got.Encoding)
		assert.Equal(t, rec.Fingerprint, got.Fingerprint)
		assert.Equal(t, rec.LeaseToken, got.LeaseToken)
		assert.True(t, got.LeaseExpires.IsZero())
		assert.Equal(t, rec.Expires.Truncate(time.Microsecond).Add(time.Microsecond).UnixMicro(), got.Expires.UnixMicro(), "ends round up")
		assert.Equal(t, 1, l.balance(t, "a"))

		empty := claim(t, s, "empty", "tok")
		empty.Data = []byte{}
		require.NoError(t, s.Complete(ctx, empty, []any{l.add("a", 1, false)}))
		got, err = s.Get(ctx, "empty")
		require.NoError(t, err)
		assert.NotNil(t, got.Data)
		assert.Empty(t, got.Data)
		assert.Empty(t, got.Encoding)
	})

	t.Run("resend", func(t *testing.T) {
		s, l, _, _ := execStore(t)
		rec := claim(t, s, "k", "tok")
		require.NoError(t, s.Complete(ctx, rec, []any{l.add("a", 1, false)}))
		ran.Store(0)
		require.NoError(t, s.Complete(ctx, rec, []any{counted(l.add("a", 1, false))}), "a resend of a committed completion")
		assert.Zero(t, ran.Load(), "no write runs twice")
		assert.Equal(t, 1, l.balance(t, "a"))
	})

	t.Run("lease lost", func(t *testing.T) {
		s, l, _, _ := execStore(t)
		rec := claim(t, s, "k", "tok")
		rec.LeaseToken = "another"
		ran.Store(0)
		err := s.Complete(ctx, rec, []any{counted(l.add("a", 1, false))})
		require.ErrorIs(t, err, idem.ErrLeaseLost)
		assert.Zero(t, ran.Load(), "a fenced owner runs no write")
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusInProgress, got.Status)
		assert.Equal(t, "tok", got.LeaseToken)
	})

	t.Run("connection cut", func(t *testing.T) {
		s, l, armed, cut := execStore(t)
		rec := claim(t, s, "k", "tok")
		marker := []byte("BEGIN; WITH done AS")
		armed.Store(&marker)
		ran.Store(0)
		err := s.Complete(ctx, rec, []any{counted(l.add("a", 1, false))})
		require.True(t, cut.Load(), "the connection was cut after BEGIN and the completion were sent")
		require.ErrorIs(t, err, idemstore.ErrNotCommitted, "%v", err)
		require.ErrorIs(t, err, idem.ErrStore)
		assert.Zero(t, ran.Load())
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusInProgress, got.Status, "nothing committed")
		assert.Equal(t, 0, l.balance(t, "a"))

		// The resend waits for the cut connection's transaction to roll back, then commits.
		require.NoError(t, s.Complete(ctx, rec, []any{counted(l.add("a", 1, false))}))
		assert.EqualValues(t, 1, ran.Load())
		assert.Equal(t, 1, l.balance(t, "a"))
		got, err = s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusCompleted, got.Status)
	})

	t.Run("guarded, concurrent", func(t *testing.T) {
		// Through the guard, 16 callers on 4 keys: each key's write commits once.
		s, l, _, _ := execStore(t)
		g, err := idem.New(s, "begin", idem.WithScope("test"))
		require.NoError(t, err)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := string(rune('a' + i%4))
				for {
					_, _, err := idem.Do(ctx, g, idem.Request{Key: key}, func(ctx context.Context) (out, error) {
						return out{N: 1}, pgstore.Attach(ctx, l.add(key, 1, false))
					})
					if err == nil || ctx.Err() != nil {
						return
					}
					time.Sleep(time.Millisecond) // in progress elsewhere: call again
				}
			}()
		}
		wg.Wait()
		for i := range 4 {
			assert.Equal(t, 1, l.balance(t, string(rune('a'+i))))
		}
	})
}
