package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// extendHeld begins a transaction on pool that extends key's lease under token (the
// Store.Extend statement of the same owner: a heartbeat, or an earlier attempt of it
// landing late) and keeps its row lock until the caller commits.
func extendHeld(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, table, key, token string, until time.Time) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	tag, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET lease_expires_at = GREATEST(lease_expires_at, $3::timestamptz)
WHERE id = $1::text AND lease_token = $2::text AND status = 'INPROGRESS'`, pgx.Identifier{table}.Sanitize()), key, token, until)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the owner's extension holds the row")
	return tx
}

// TestBatchCompleteBehindOwnExtension: the owner of key k (token "a") completes it in a
// batch while its own lease extension (same token, still in progress) holds the row. The
// batch statement's snapshot predates the extension's commit, and the version its locked
// CTE locks is invisible to that snapshot; the completion must still find the record
// under its token on the newest version, as the single Complete does, and complete it:
// answered ErrLeaseLost, the record would stay in progress and, once the lease ends, a
// retry would take the key over and run the handler a second time.
func TestBatchCompleteBehindOwnExtension(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"CompleteMany", "CompleteManyAttached", "Complete"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, pool := newStore(t, nil)
			bs := batchStore(t, s)
			l := newLedger(t, pool)
			other := pgtest.Pool(t)
			ks := []string{"k"}
			for _, r := range bs.ClaimMany(ctx, claims(ks, "a", t0), t0) {
				require.NoError(t, r.Err)
				require.True(t, r.Claimed)
			}
			tx := extendHeld(t, other, s.Table(), "k", "a", t0.Add(5*time.Minute))

			rec := completed(inProgress("k", "a", t0), t0)
			done := make(chan error, 1)
			go func() {
				switch mode {
				case "CompleteMany":
					done <- bs.CompleteMany(ctx, []*idemstore.Record{rec})[0]
				case "CompleteManyAttached":
					done <- bs.CompleteManyAttached(ctx, []*idemstore.Record{rec}, [][]any{{l.add("acct", 1, false)}})[0]
				default:
					done <- s.Complete(ctx, rec, nil)
				}
			}()
			waitForLockWait(t, pool, s.Table())
			require.NoError(t, tx.Commit(ctx))
			err := <-done
			assert.NoError(t, err, "the lease was never lost: the owner's own heartbeat held the row")
			got, err := s.Get(ctx, "k")
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, idemstore.StatusCompleted, got.Status, "the first result is stored")
			later := t0.Add(10 * time.Minute) // the lease extended to t0+5m has ended
			r := bs.ClaimMany(ctx, claims(ks, "b", later), later)[0]
			require.NoError(t, r.Err)
			assert.False(t, r.Claimed, "a retry once the lease ended must replay, not run the handler a second time")
		})
	}
}

// TestBatchStatementsBehindOwnUpdate: the batch statements behind an update of the
// owner's own that keeps its token: an earlier attempt of the same statement (a resend
// after a lost answer, whose first attempt lands late, or the guard's completion queued
// behind its batch's), or the owner's extension. Each answers as its single statement.
//
//   - CompleteMany resent while its first attempt (same record, same token) holds the
//     row: the first commits the completion; the resend, conditional on the token alone
//     as Complete is, writes the same values again and answers nil (not ErrLeaseLost,
//     which would report the lease lost for a completion that stands).
//   - ReleaseMany behind the owner's extension: releases, leaving a tombstone, as
//     Release does (not ErrLeaseLost, which would leave the key blocked until the
//     extended lease ends).
func TestBatchStatementsBehindOwnUpdate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		hold func(t *testing.T, tx pgx.Tx, table string)
		run  func(ctx context.Context, s idemstore.BatchAttachStore) error
		want idemstore.Status // the record's status afterwards
	}{
		{
			name: "CompleteManyResent",
			hold: func(t *testing.T, tx pgx.Tx, table string) {
				rec := completed(inProgress("k", "a", t0), t0)
				tag, err := tx.Exec(context.Background(), fmt.Sprintf(`UPDATE %s SET status = $2::text, expires_at = $3::timestamptz,
	lease_expires_at = NULL, validation = $4::text, data = $5::bytea, encoding = $6::text, version = $7::integer
WHERE id = $1::text AND lease_token = $8::text`, pgx.Identifier{table}.Sanitize()),
					rec.Key, string(rec.Status), rec.Expires, rec.Fingerprint, rec.Data, rec.Encoding, rec.Version, rec.LeaseToken)
				require.NoError(t, err)
				require.EqualValues(t, 1, tag.RowsAffected())
			},
			run: func(ctx context.Context, s idemstore.BatchAttachStore) error {
				return s.CompleteMany(ctx, []*idemstore.Record{completed(inProgress("k", "a", t0), t0)})[0]
			},
			want: idemstore.StatusCompleted,
		},
		{
			name: "ReleaseManyBehindExtension",
			hold: func(t *testing.T, tx pgx.Tx, table string) {
				_, err := tx.Exec(context.Background(), fmt.Sprintf(`UPDATE %s SET lease_expires_at = $2::timestamptz
WHERE id = $1::text AND lease_token = 'a'`, pgx.Identifier{table}.Sanitize()), "k", t0.Add(5*time.Minute))
				require.NoError(t, err)
			},
			run: func(ctx context.Context, s idemstore.BatchAttachStore) error {
				return s.ReleaseMany(ctx, []string{"k"}, []string{"a"}, t0)[0]
			},
			want: idemstore.StatusInProgress,
		},
	}
	// The single statements under the same interleavings: they hold.
	cases = append(cases,
		struct {
			name string
			hold func(t *testing.T, tx pgx.Tx, table string)
			run  func(ctx context.Context, s idemstore.BatchAttachStore) error
			want idemstore.Status
		}{name: "CompleteResent", hold: cases[0].hold, want: cases[0].want,
			run: func(ctx context.Context, s idemstore.BatchAttachStore) error {
				return s.Complete(ctx, completed(inProgress("k", "a", t0), t0), nil)
			}},
		struct {
			name string
			hold func(t *testing.T, tx pgx.Tx, table string)
			run  func(ctx context.Context, s idemstore.BatchAttachStore) error
			want idemstore.Status
		}{name: "ReleaseBehindExtension", hold: cases[1].hold, want: cases[1].want,
			run: func(ctx context.Context, s idemstore.BatchAttachStore) error {
				return s.Release(ctx, "k", "a", t0)
			}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, pool := newStore(t, nil)
			bs := batchStore(t, s)
			other := pgtest.Pool(t)
			r := bs.ClaimMany(ctx, claims([]string{"k"}, "a", t0), t0)[0]
			require.NoError(t, r.Err)
			require.True(t, r.Claimed)
			tx, err := other.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			tc.hold(t, tx, s.Table())
			done := make(chan error, 1)
			go func() { done <- tc.run(ctx, bs) }()
			waitForLockWait(t, pool, s.Table())
			require.NoError(t, tx.Commit(ctx))
			assert.NoError(t, <-done, "the owner's token holds the record throughout")
			got, err := s.Get(ctx, "k")
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Status)
			if tc.want == idemstore.StatusInProgress {
				assert.Equal(t, idemstore.ReleasedToken("a"), got.LeaseToken, "released: a tombstone")
			}
		})
	}
}

// TestGuardBatchRunsOnceAfterOwnExtension: TestBatchCompleteBehindOwnExtension through
// the guard. One request is claimed in a batch and its handler runs once; while Settle's
// completion goes out, an UPDATE of the owner's own record that keeps its token (the
// owner's extension still executing on the server: the watchdog's stop cancels the call
// on the client side, not the statement already running) holds the row and commits.
// Settle records the handler's outcome, and the next delivery of the same request, once
// the lease has ended, replays the first result instead of running the handler again.
func TestGuardBatchRunsOnceAfterOwnExtension(t *testing.T) {
	t.Parallel()
	for _, attached := range []bool{false, true} {
		t.Run(fmt.Sprintf("attached=%t", attached), func(t *testing.T) {
			t.Parallel()
			// A deadline, so that outcomes wait for Settle.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, pool := newStore(t, nil)
			l := newLedger(t, pool)
			other := pgtest.Pool(t)
			var mu sync.Mutex
			now := time.Now()
			clock := idem.ClockFunc(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
			g, err := idem.New(s, "batch", idem.WithScope("test"), idem.WithClock(clock), idem.WithLease(5*time.Minute))
			require.NoError(t, err)
			reqs := []idem.Request{{Key: "m"}, {Key: "n"}} // n never runs: released by Settle
			runs := 0
			handler := func(ctx context.Context) (out, error) {
				runs++
				if attached {
					return out{N: runs}, pgstore.Attach(ctx, l.add("acct", 1, false))
				}
				return out{N: runs}, nil
			}

			b := g.Claim(ctx, reqs)
			_, _, err = idem.DoClaimed(ctx, b, 0, handler)
			require.NoError(t, err)
			tx, err := other.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			m, err := g.StoredKey(reqs[0])
			require.NoError(t, err)
			tag, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET lease_expires_at = lease_expires_at + interval '1 second'
WHERE id = $1 AND status = 'INPROGRESS'`, pgx.Identifier{s.Table()}.Sanitize()), m)
			require.NoError(t, err)
			require.EqualValues(t, 1, tag.RowsAffected(), "the owner's record, its token kept")
			settled := make(chan []error, 1)
			go func() { settled <- b.Settle(ctx) }()
			waitForLockWait(t, pool, s.Table())
			require.NoError(t, tx.Commit(ctx))
			assert.NoError(t, (<-settled)[0], "the handler's outcome is recorded: nobody else held the key")

			mu.Lock()
			now = now.Add(20 * time.Minute) // the lease has ended; the record has not expired
			later := now
			mu.Unlock()
			// The redelivery's deadline, on the guard's clock.
			ctx2, cancel2 := context.WithDeadline(context.Background(), later.Add(30*time.Second))
			defer cancel2()
			b = g.Claim(ctx2, reqs[:1])
			got, _, err := idem.DoClaimed(ctx2, b, 0, handler)
			require.NoError(t, err)
			b.Settle(ctx2)
			assert.Equal(t, 1, runs, "the handler ran once")
			assert.Equal(t, 1, got.N, "the retry gets the first result")
		})
	}
}

// TestClaimManyBehindOwnerExtension: another caller claims key k in a batch once the
// owner's lease has ended, while the owner's extension holds the row: the claim reads the
// newest version (the upsert's WHERE and the refusal read back under a row lock), so it
// refuses against the extended lease and answers the record as the extension left it.
func TestClaimManyBehindOwnerExtension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	bs := batchStore(t, s)
	other := pgtest.Pool(t)
	r := bs.ClaimMany(ctx, claims([]string{"k"}, "a", t0), t0)[0]
	require.NoError(t, r.Err)
	require.True(t, r.Claimed)
	extended := t0.Add(5 * time.Minute)
	tx := extendHeld(t, other, s.Table(), "k", "a", extended)
	later := t0.Add(2 * time.Minute) // the one-minute lease has ended; the extended one has not
	done := make(chan idemstore.ClaimResult, 1)
	go func() { done <- bs.ClaimMany(ctx, claims([]string{"k"}, "b", later), later)[0] }()
	waitForLockWait(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	r = <-done
	require.NoError(t, r.Err)
	assert.False(t, r.Claimed, "the owner's extended lease holds the key")
	require.NotNil(t, r.Prev, "the refusing record is read back")
	assert.Equal(t, "a", r.Prev.LeaseToken)
	assert.True(t, r.Prev.LeaseExpires.Equal(extended), "the extension's lease: %v", r.Prev.LeaseExpires)
}
