package pgstore_test

import (
	"context"
	"syscall"
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

// TestSynchronousCommitOff documents the durability the store needs: a completion
// acknowledged with synchronous_commit=off is lost when the server crashes before the WAL
// writer flushes it (up to three wal_writer_delay later, 600 ms by default), and the next
// request with the key runs the handler a second time. With the default (on), the same
// crash keeps the record and the retry replays it.
//
// The WAL writer is held stopped (SIGSTOP) from the call to the crash, so the window is
// certain instead of a race; the crash is that of the server (SIGKILL of the WAL writer,
// then PostgreSQL's immediate shutdown), which discards what is only in the WAL buffers.
func TestSynchronousCommitOff(t *testing.T) {
	server := pgtest.Private(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		commit   string // synchronous_commit of the store's sessions
		wantRuns int
	}{
		{name: "on: the completion survives", commit: "on", wantRuns: 1},
		{name: "off: the completion is lost, the handler runs twice", commit: "off", wantRuns: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			admin := pgtest.PoolFor(t, server.URL(), nil)
			table := pgtest.Name("idem")
			require.NoError(t, pgstore.CreateTable(ctx, admin, table))
			pool := pgtest.PoolFor(t, server.URL(), func(c *pgxpool.Config) {
				c.ConnConfig.RuntimeParams["synchronous_commit"] = tc.commit
			})
			walWriter := walWriterPID(t, admin)
			require.NoError(t, syscall.Kill(walWriter, syscall.SIGSTOP))
			killed := false
			t.Cleanup(func() { // before the server's own cleanup stops it
				if !killed {
					_ = syscall.Kill(walWriter, syscall.SIGCONT)
				}
			})

			runs := 0
			handler := func(context.Context) (int, error) { runs++; return runs, nil }
			call := func(pool *pgxpool.Pool, now time.Time) (int, bool) {
				t.Helper()
				s, err := pgstore.New(pool, table)
				require.NoError(t, err)
				g, err := idem.New(s, "charge", idem.WithScope("test"), idem.WithLease(time.Minute),
					idem.WithClock(idem.ClockFunc(func() time.Time { return now })))
				require.NoError(t, err)
				got, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, handler)
				require.NoError(t, err)
				return got, replayed
			}
			now := time.Now()
			got, replayed := call(pool, now)
			require.Equal(t, 1, got)
			require.False(t, replayed)

			require.NoError(t, syscall.Kill(walWriter, syscall.SIGKILL))
			killed = true
			require.NoError(t, server.Crash())
			pool.Close()
			admin.Close()
			require.NoError(t, server.Restart(ctx))

			// The retry comes after the first call's lease, so a record lost back to
			// in progress would be taken over too.
			after := pgtest.PoolFor(t, server.URL(), nil)
			got, replayed = call(after, now.Add(5*time.Minute))
			assert.Equal(t, tc.wantRuns, runs, "handler runs")
			assert.Equal(t, tc.wantRuns == 1, replayed)
			assert.Equal(t, tc.wantRuns, got)
			s, err := pgstore.New(after, table)
			require.NoError(t, err)
			sk, err := mustGuard(t, s).StoredKey(idem.Request{Key: "k"})
			require.NoError(t, err)
			rec, err := s.Get(ctx, sk)
			require.NoError(t, err)
			require.NotNil(t, rec)
			assert.Equal(t, idemstore.StatusCompleted, rec.Status)
		})
	}
}

// mustGuard returns the guard the test's calls use, for its stored keys.
func mustGuard(t *testing.T, s *pgstore.Store) *idem.Guard {
	t.Helper()
	g, err := idem.New(s, "charge", idem.WithScope("test"))
	require.NoError(t, err)
	return g
}

// walWriterPID returns the process id of the server's WAL writer, which starts once the
// server accepts connections.
func walWriterPID(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var pid int
		err := pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`).Scan(&pid)
		if err == nil {
			return pid
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		require.True(t, time.Now().Before(deadline), "no WAL writer after 30 s")
	}
}
