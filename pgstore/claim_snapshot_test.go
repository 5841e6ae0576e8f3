package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// TestClaimRefusalTakesNoTransactionID: in pgx's default mode, a claim that a record
// refuses (a replay, a live lease, the tombstone of the claim's own release, a checkpoint
// it does not carry, its own earlier attempt) writes nothing and locks nothing, so
// PostgreSQL assigns it no transaction ID: it costs what the raw INSERT ... ON CONFLICT DO
// NOTHING read costs. The claim runs in a transaction, whose txid_current_if_assigned()
// then says whether any of its statements took a row lock or wrote. A claim that wins does
// take one (the control). In the modes that parse and plan every statement the claim is
// the upsert alone (see Store.Claim), which locks the refusing record: there the answers
// are checked, not the lock.
func TestClaimRefusalTakesNoTransactionID(t *testing.T) {
	t.Parallel()
	later := t0.Add(2 * time.Minute) // leases taken at t0 have ended
	cases := []struct {
		name string
		// setup leaves the key's record; claim is the claim sent then, at now.
		setup  func(t *testing.T, s *pgstore.Store, key string)
		claim  *idemstore.Record
		now    time.Time
		wins   bool
		status idemstore.Status
	}{
		{name: "Completed", setup: completeAt("A", t0), claim: inProgress("k", "B", t0.Add(time.Second)),
			now: t0.Add(time.Second), status: idemstore.StatusCompleted},
		{name: "LiveLease", setup: claimAt("A", t0), claim: inProgress("k", "B", t0.Add(time.Second)),
			now: t0.Add(time.Second), status: idemstore.StatusInProgress},
		{name: "OwnEarlierAttempt", setup: claimAt("A", t0), claim: inProgress("k", "A", t0),
			now: t0, status: idemstore.StatusInProgress},
		{name: "OwnTombstone", setup: releasedAt("A", "", t0), claim: inProgress("k", "A", t0),
			now: t0.Add(time.Second), status: idemstore.StatusInProgress},
		{name: "CheckpointNotCarried", setup: checkpointAt("A", "c1", t0), claim: inProgress("k", "B", later),
			now: later, status: idemstore.StatusInProgress},
		{name: "CompletedResend", setup: completeAt("A", t0), claim: inProgress("k", "A", t0),
			now: t0.Add(time.Second), status: idemstore.StatusCompleted},
		// Controls: a claim that wins writes, and so has a transaction ID.
		{name: "NewKey", setup: func(*testing.T, *pgstore.Store, string) {}, claim: inProgress("k", "B", t0), now: t0, wins: true},
		{name: "Takeover", setup: claimAt("A", t0), claim: inProgress("k", "B", later), now: later, wins: true},
	}
	modes := map[string]pgx.QueryExecMode{"cache": pgx.QueryExecModeCacheStatement, "exec": pgx.QueryExecModeExec,
		"simple": pgx.QueryExecModeSimpleProtocol}
	for mname, mode := range modes {
		pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
		for _, tc := range cases {
			t.Run(mname+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				s, _ := newStore(t, pool)
				tc.setup(t, s, "k")

				tx, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = tx.Rollback(ctx) }()
				txStore, err := pgstore.New(tx, s.Table())
				require.NoError(t, err)
				prev, claimed, err := txStore.Claim(ctx, tc.claim, tc.now)
				require.NoError(t, err)
				var xid *int64
				require.NoError(t, tx.QueryRow(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid))
				require.Equal(t, tc.wins, claimed)
				if tc.wins {
					assert.NotNil(t, xid, "a claim that wins writes")
					return
				}
				require.NotNil(t, prev)
				assert.Equal(t, tc.status, prev.Status)
				if mode == pgx.QueryExecModeCacheStatement {
					assert.Nil(t, xid, "a refused claim took a row lock or wrote (transaction ID %v)", xid)
				}
			})
		}
	}
}

// claimBeside claims rec at now in a goroutine while tx holds the key's row, uncommitted:
// a claim the record refuses in the statement's snapshot must answer without waiting for
// tx. It fails the test if the claim waits for the row lock instead (then lets it through
// by committing tx), and returns the answer; tx stays open otherwise.
func claimBeside(t *testing.T, s *pgstore.Store, pool *pgxpool.Pool, tx pgx.Tx, rec *idemstore.Record, now time.Time) claimAnswer {
	t.Helper()
	done := make(chan claimAnswer, 1)
	go func() {
		prev, claimed, err := s.Claim(context.Background(), rec, now)
		done <- claimAnswer{prev, claimed, err}
	}()
	for {
		select {
		case a := <-done:
			return a
		case <-time.After(10 * time.Millisecond):
		}
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, s.Table()).Scan(&n))
		if n > 0 {
			require.NoError(t, tx.Commit(context.Background()))
			<-done
			t.Fatal("a claim the snapshot refuses waited for the row lock of a concurrent writer")
		}
	}
}

// TestClaimRacesOwner interleaves a claim with the owner A's completion or release, which
// holds the key's row uncommitted when the claim's statement starts:
//   - a claimer whose clock has A's lease live is refused at once, on the record as it was
//     committed when the statement began (A in progress), without waiting for A;
//   - a claimer whose clock has A's lease ended waits for A's commit and is judged on the
//     record as committed: a completion refuses it (a replay of A's result), a release
//     lets another token take the key over, and refuses A's own token (a late first
//     attempt of A's claim, the SDK resending it, after A released).
func TestClaimRacesOwner(t *testing.T) {
	t.Parallel()
	ahead := t0.Add(2 * time.Minute) // A's lease of t0 has ended
	cases := []struct {
		name string
		// hold is A's write, made in a transaction through txStore.
		hold  func(t *testing.T, txStore *pgstore.Store)
		token string
		now   time.Time
		check func(t *testing.T, a claimAnswer)
	}{
		{
			name: "CompletionLiveLease", hold: completing, token: "B", now: t0.Add(time.Second),
			check: refusedBy(idemstore.StatusInProgress, "A"),
		},
		{
			name: "ReleaseLiveLease", hold: releasing, token: "B", now: t0.Add(time.Second),
			check: refusedBy(idemstore.StatusInProgress, "A"),
		},
		{
			name: "OwnLateAttemptDuringRelease", hold: releasing, token: "A", now: t0.Add(time.Second),
			check: refusedBy(idemstore.StatusInProgress, "A"),
		},
		{
			name: "CompletionClockAhead", hold: completing, token: "B", now: ahead,
			check: refusedBy(idemstore.StatusCompleted, "A"),
		},
		{
			name: "ReleaseClockAhead", hold: releasing, token: "B", now: ahead,
			check: func(t *testing.T, a claimAnswer) {
				require.NoError(t, a.err)
				assert.True(t, a.claimed, "the released key was not taken over")
			},
		},
		{
			name: "OwnLateAttemptAfterReleaseClockAhead", hold: releasing, token: "A", now: ahead,
			check: refusedBy(idemstore.StatusInProgress, idemstore.ReleasedToken("A")),
		},
	}
	modes := map[string]pgx.QueryExecMode{"cache": pgx.QueryExecModeCacheStatement, "exec": pgx.QueryExecModeExec}
	for mname, mode := range modes {
		db := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) { c.ConnConfig.DefaultQueryExecMode = mode })
		for _, tc := range cases {
			if mode != pgx.QueryExecModeCacheStatement && !tc.now.Equal(ahead) {
				// In exec mode the claim is the upsert alone, which waits for the owner's
				// row lock whatever the record: no answer from the snapshot to check.
				continue
			}
			t.Run(mname+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				runOwnerRace(t, db, tc.hold, tc.token, tc.now, ahead, tc.check)
			})
		}
	}
}

// runOwnerRace is a case of TestClaimRacesOwner through db.
func runOwnerRace(t *testing.T, db *pgxpool.Pool, hold func(t *testing.T, txStore *pgstore.Store), token string,
	now, ahead time.Time, check func(t *testing.T, a claimAnswer)) {
	ctx := context.Background()
	s, pool := newStore(t, db)
	claimAt("A", t0)(t, s, "k")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	txStore, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	hold(t, txStore)

	var a claimAnswer
	if now.Equal(ahead) {
		a = claimWhileHeld(t, s, pool, tx, inProgress("k", token, now), now)
	} else {
		a = claimBeside(t, s, pool, tx, inProgress("k", token, now), now)
		require.NoError(t, tx.Commit(ctx))
	}
	check(t, a)
}

// completing is the owner A's completion of "k", claimed at t0.
func completing(t *testing.T, txStore *pgstore.Store) {
	require.NoError(t, txStore.Complete(context.Background(), completed(inProgress("k", "A", t0), t0), nil))
}

// releasing is the owner A's release of "k", at t0.
func releasing(t *testing.T, txStore *pgstore.Store) {
	require.NoError(t, txStore.Release(context.Background(), "k", "A", t0))
}

// refusedBy checks that a claim was refused by a record of status under token.
func refusedBy(status idemstore.Status, token string) func(t *testing.T, a claimAnswer) {
	return func(t *testing.T, a claimAnswer) {
		t.Helper()
		require.NoError(t, a.err)
		require.False(t, a.claimed)
		require.NotNil(t, a.prev)
		assert.Equal(t, status, a.prev.Status)
		assert.Equal(t, token, a.prev.LeaseToken)
	}
}

// TestClaimResendAfterOwnerFinished: the SDK resends A's claim and the first attempt lands
// after A completed (or released) the key: the claim is refused by A's completed record
// (a replay) or by the tombstone of A's release, and takes no row lock.
func TestClaimResendAfterOwnerFinished(t *testing.T) {
	t.Parallel()
	for name, finish := range map[string]func(t *testing.T, s *pgstore.Store, key string){
		"Completed": completeAt("A", t0), "Released": releasedAt("A", "", t0),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, pool := newStore(t, nil)
			finish(t, s, "k")
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			txStore, err := pgstore.New(tx, s.Table())
			require.NoError(t, err)
			prev, claimed, err := txStore.Claim(ctx, inProgress("k", "A", t0), t0.Add(time.Second))
			require.NoError(t, err)
			assert.False(t, claimed, "the late first attempt of A's claim holds the key again")
			require.NotNil(t, prev)
			if name == "Completed" {
				assert.Equal(t, idemstore.StatusCompleted, prev.Status)
			} else {
				assert.Equal(t, idemstore.ReleasedToken("A"), prev.LeaseToken)
			}
			var xid *int64
			require.NoError(t, tx.QueryRow(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid))
			assert.Nil(t, xid, "the refused resend took a row lock")
		})
	}
}

// TestClaimExpiredRecordOneWinner: claimers race for a record whose lease has ended (each
// statement's snapshot sees it claimable, so each takes the upsert's path): exactly one
// wins, and every other one is refused by the winner's record.
func TestClaimExpiredRecordOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	tokens := []string{"B", "C", "D", "E"}
	for round := range 10 {
		key := "k" + string(rune('a'+round))
		claimAt("A", t0)(t, s, key)
		now := t0.Add(2 * time.Minute)
		answers := make([]claimAnswer, len(tokens))
		var wg sync.WaitGroup
		for i, tok := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prev, claimed, err := s.Claim(ctx, inProgress(key, tok, now), now)
				answers[i] = claimAnswer{prev, claimed, err}
			}()
		}
		wg.Wait()
		winner := ""
		for i, a := range answers {
			require.NoError(t, a.err)
			if a.claimed {
				require.Empty(t, winner, "two claims won the key")
				winner = tokens[i]
			}
		}
		require.NotEmpty(t, winner, "no claim won the expired key")
		for i, a := range answers {
			if !a.claimed {
				require.NotNil(t, a.prev)
				assert.Equal(t, winner, a.prev.LeaseToken, "claim %s refused by another record than the winner's", tokens[i])
			}
		}
	}
}
