package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// unconfirmedServer is a private server whose synchronous standby never confirms, with
// key k claimed under token A at start and completed through s, the completion's wait
// for the standby cancelled: committed locally and visible, not replicated; a failover
// loses it. It returns s's pool.
func unconfirmedServer(t *testing.T, table string, start time.Time) *pgxpool.Pool {
	t.Helper()
	server := pgtest.Private(t)
	ctx := context.Background()
	admin := pgtest.PoolFor(t, server.URL(), nil)
	require.NoError(t, pgstore.CreateTable(ctx, admin, table))
	scratch := pgtest.Name("scratch")
	_, err := admin.Exec(ctx, `CREATE TABLE `+scratch+` (n int)`)
	require.NoError(t, err)
	pool := pgtest.PoolFor(t, server.URL(), nil)
	s, err := pgstore.New(pool, table)
	require.NoError(t, err)
	rec := inProgress("k", "A", start)
	_, claimed, err := s.Claim(ctx, rec, start)
	require.NoError(t, err)
	require.True(t, claimed)

	_, err = admin.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = 'review30_standby'`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `ALTER SYSTEM RESET synchronous_standby_names`)
		_, _ = admin.Exec(context.Background(), `SELECT pg_reload_conf()`)
	})
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
	for waited := false; !waited; {
		var err error
		waited, err = cancelWait(func() error {
			_, err := pool.Exec(ctx, `INSERT INTO `+scratch+` VALUES (1)`)
			return err
		})
		require.NoError(t, err)
	}
	waited, err := cancelWait(func() error { return s.Complete(ctx, completed(rec, start), nil) })
	require.NoError(t, err)
	require.True(t, waited, "the completion did not wait for the standby")
	return pool
}

// TestReview30_CompletionResendOfUnconfirmedCompletion: the server runs synchronous
// replication, every session at the defaults. The owner's completion (no attached writes)
// commits locally, its wait for the standby cancelled (the owner's statement_timeout or
// its ctx: it got no answer), and the guard sends the completion again.
//
// Expected (as on e584f63, whose completion read the record FOR SHARE when its UPDATE
// completed nothing, so the resend took a transaction ID and its commit waited for the
// standby): the resend does not report the key completed before a synchronous standby
// confirms it; here none ever does, so it is still waiting at its deadline. On fix25
// (pgfast's plain completion) the UPDATE matches no row and the second read (tokenStatus)
// is a plain SELECT: no lock, no transaction ID, no wait; the resend returns nil at once,
// the guard hands the caller the handler's result as stored, and a failover then loses the
// completion: the key runs again and its next retry gets another result.
func TestReview30_CompletionResendOfUnconfirmedCompletion(t *testing.T) {
	table := pgtest.Name("idem")
	start := time.Now()
	pool := unconfirmedServer(t, table, start)
	s, err := pgstore.New(pool, table)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err = s.Complete(ctx, completed(inProgress("k", "A", start), start), nil)
	assert.Error(t, err, "a completion's resend reported a completion no synchronous standby "+
		"confirmed: a failover loses it")
}
