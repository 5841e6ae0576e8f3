package pgstore_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestReview25_ReplayOfUnflushedCompletion: the owner's sessions run with
// synchronous_commit=off (a setting the package documentation says loses the commits of a
// crash's last moments), the retry's with the default (on). The retry is answered with a
// replay of the owner's completion, which the WAL writer (held stopped) has not flushed;
// then the server crashes.
//
// Expected (as on e584f63): a replay answered by a session at the defaults is durable.
// The claim that replays took a row lock, so its own commit flushed the WAL up to it,
// the owner's completion included; after the crash every retry gets that same first
// result and the handler has run once. On pgfast the replay is decided on the
// statement's snapshot with no lock, no transaction ID and so no flush: the retry was
// answered 1, the crash loses the completion, and the next retry runs the handler again
// and is answered 2. Two retries of one key got two different results.
func TestReview25_ReplayOfUnflushedCompletion(t *testing.T) {
	server := pgtest.Private(t)
	ctx := context.Background()
	admin := pgtest.PoolFor(t, server.URL(), nil)
	table := pgtest.Name("idem")
	require.NoError(t, pgstore.CreateTable(ctx, admin, table))
	owner := pgtest.PoolFor(t, server.URL(), func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	})
	retry := pgtest.PoolFor(t, server.URL(), nil) // synchronous_commit on, the default
	require.NoError(t, retry.Ping(ctx))
	walWriter := walWriterPID(t, admin)
	require.NoError(t, syscall.Kill(walWriter, syscall.SIGSTOP))
	killed := false
	t.Cleanup(func() {
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
	got, replayed := call(owner, now)
	require.Equal(t, 1, got)
	require.False(t, replayed)

	// The retry, from a session at the defaults: a replay of the first result.
	got, replayed = call(retry, now.Add(time.Second))
	require.True(t, replayed)
	require.Equal(t, 1, got)

	require.NoError(t, syscall.Kill(walWriter, syscall.SIGKILL))
	killed = true
	require.NoError(t, server.Crash())
	owner.Close()
	retry.Close()
	admin.Close()
	require.NoError(t, server.Restart(ctx))

	// A later retry, after the first call's lease: it must get the result the retry above
	// was answered.
	after := pgtest.PoolFor(t, server.URL(), nil)
	got, replayed = call(after, now.Add(5*time.Minute))
	assert.Equal(t, 1, runs, "handler runs: the completion a retry was answered from was lost")
	assert.True(t, replayed)
	assert.Equal(t, 1, got, "a retry got another result than the earlier retry was answered")
}
