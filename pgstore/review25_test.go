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
	"github.com/idemkit/idem/idemstore"
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
//
// The fix (fix25): the retry's store cannot see another session's synchronous_commit, so
// the package documentation asks for pgstore.WithLockingClaims on every store reading the
// table where a writer runs with it off; the stores here have it.
// TestClaimWithoutLockingClaimsAnswersFromSnapshot pins the default's behaviour.
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
	// Every store reading the table has WithLockingClaims, as the package documentation
	// asks where a writer (the owner's sessions) runs with synchronous_commit off: the
	// retry's store cannot see the owner's setting.
	call := func(pool *pgxpool.Pool, now time.Time) (int, bool) {
		t.Helper()
		s, err := pgstore.New(pool, table, pgstore.WithLockingClaims())
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

// TestReview25_ReplayOfUnconfirmedCompletion: the server runs synchronous replication
// (the package documentation's advice where a failover must not reopen keys), every
// session at the defaults. The owner's completion commits, but its wait for the standby's
// confirmation is cancelled (pg_cancel_backend here; statement_timeout or an operator in
// production): PostgreSQL then says "the transaction has already committed locally, but
// might not have been replicated to the standby", and the row is visible. A failover now
// loses it.
//
// Say the owner's caller got no answer (its Lambda timed out and died; the session's
// statement_timeout then cancelled the wait). Expected (as on e584f63): a retry's claim
// is not answered with that completion before a synchronous standby confirms it. There
// the claim locked the row, so its own commit waited for the standby, whose confirmation
// covers the owner's earlier commit too; here no standby ever confirms, so the claim is
// still waiting at its deadline. On pgfast the claim reads the row in its snapshot with
// no lock and no transaction ID, commits nothing, waits for no standby, and answers the
// replay at once: a failover then runs the key again and its next retry gets another
// result.
func TestReview25_ReplayOfUnconfirmedCompletion(t *testing.T) {
	replayOfUnconfirmed(t, func(ctx context.Context, s *pgstore.Store, rec *idemstore.Record,
		now time.Time) (*idemstore.Record, bool, error) {
		return s.Claim(ctx, rec, now)
	})
}

// TestReview25_BatchReplayOfUnconfirmedCompletion: TestReview25_ReplayOfUnconfirmedCompletion
// with the retry's claim in a batch ([pgstore.Store.ClaimMany]), whose refusals pgfast
// decides on the snapshot alike. Expected: as there.
func TestReview25_BatchReplayOfUnconfirmedCompletion(t *testing.T) {
	replayOfUnconfirmed(t, func(ctx context.Context, s *pgstore.Store, rec *idemstore.Record,
		now time.Time) (*idemstore.Record, bool, error) {
		res := s.ClaimMany(ctx, []*idemstore.Record{rec}, now)
		return res[0].Prev, res[0].Claimed, res[0].Err
	})
}

// claimFunc claims rec at now through s.
type claimFunc = func(ctx context.Context, s *pgstore.Store, rec *idemstore.Record,
	now time.Time) (*idemstore.Record, bool, error)

// replayOfUnconfirmed is TestReview25_ReplayOfUnconfirmedCompletion with the retry's claim
// made by claim.
func replayOfUnconfirmed(t *testing.T, claim claimFunc) {
	server := pgtest.Private(t)
	ctx := context.Background()
	admin := pgtest.PoolFor(t, server.URL(), nil)
	table := pgtest.Name("idem")
	require.NoError(t, pgstore.CreateTable(ctx, admin, table))
	scratch := pgtest.Name("scratch")
	_, err := admin.Exec(ctx, `CREATE TABLE `+scratch+` (n int)`)
	require.NoError(t, err)
	pool := pgtest.PoolFor(t, server.URL(), nil)
	s, err := pgstore.New(pool, table)
	require.NoError(t, err)

	start := time.Now()
	rec := inProgress("k", "A", start)
	_, claimed, err := s.Claim(ctx, rec, start)
	require.NoError(t, err)
	require.True(t, claimed)

	// Synchronous replication to a standby that never confirms.
	_, err = admin.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = 'review25_standby'`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	t.Cleanup(func() { // the server is the test's own, dropped after; keep its cleanup quick
		_, _ = admin.Exec(context.Background(), `ALTER SYSTEM RESET synchronous_standby_names`)
		_, _ = admin.Exec(context.Background(), `SELECT pg_reload_conf()`)
	})
	// cancelWait runs fn, cancels the wait for the standby of the commit fn makes, and
	// returns whether it waited for the standby, and fn's error.
	cancelWait := func(fn func() error) (bool, error) {
		done := make(chan error, 1)
		go func() { done <- fn() }()
		for range 3000 {
			select {
			case err := <-done:
				return false, err
			default:
			}
			var n int
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_cancel_backend(pid))
				FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n))
			if n > 0 {
				return true, <-done
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the commit neither returned nor waited for the standby")
		return false, nil
	}
	// Until the server waits for the standby (the setting takes effect shortly after the
	// reload).
	for waited := false; !waited; {
		var err error
		waited, err = cancelWait(func() error {
			_, err := pool.Exec(ctx, `INSERT INTO `+scratch+` VALUES (1)`)
			return err
		})
		require.NoError(t, err)
	}

	// The owner completes; its commit is visible, not confirmed.
	waited, err := cancelWait(func() error { return s.Complete(ctx, completed(rec, start), nil) })
	require.NoError(t, err)
	require.True(t, waited, "the completion did not wait for the standby")

	// A retry's claim, at the defaults, with a deadline.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	later := start.Add(time.Second)
	prev, claimed, err := claim(cctx, s, inProgress("k", "B", later), later)
	if err == nil {
		assert.False(t, claimed)
		require.NotNil(t, prev)
		assert.NotEqual(t, "COMPLETED", string(prev.Status),
			"a claim was answered with a completion no synchronous standby confirmed: a failover loses it")
	}
}
