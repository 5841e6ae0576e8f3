package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
)

// batchStore returns s as the batch store it must be.
func batchStore(t *testing.T, s *pgstore.Store) idemstore.BatchAttachStore {
	t.Helper()
	bs, ok := any(s).(idemstore.BatchAttachStore)
	require.True(t, ok, "pgstore.Store is an idemstore.BatchAttachStore")
	return bs
}

// keys returns n keys named after prefix.
func keys(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ks
}

// claims returns the claim records of ks for token at now.
func claims(ks []string, token string, now time.Time) []*idemstore.Record {
	recs := make([]*idemstore.Record, len(ks))
	for i, k := range ks {
		recs[i] = inProgress(k, token, now)
	}
	return recs
}

// TestBatchRoundTrips counts the statements of each batch operation on ten records: one
// each, whatever the records' states (new, replayed, in flight, taken over), and one
// transaction of three statements plus the writes' own for completions with attached
// writes.
func TestBatchRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCounter(nil)
	s, pool := newStore(t, c)
	c.db = pool
	bs := batchStore(t, s)
	l := newLedger(t, pool)
	ks := keys("k", 10)

	c.take()
	res := bs.ClaimMany(ctx, claims(ks, "a", t0), t0)
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "claims of ten new keys: one statement")
	for i, r := range res {
		require.NoError(t, r.Err)
		assert.True(t, r.Claimed, "key %d", i)
	}

	res = bs.ClaimMany(ctx, claims(ks, "b", t0), t0)
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "claims of ten keys in flight: one statement")
	for i, r := range res {
		require.NoError(t, r.Err)
		assert.False(t, r.Claimed)
		if assert.NotNil(t, r.Prev, "key %d: the refusing record comes back from the same statement", i) {
			assert.Equal(t, "a", r.Prev.LeaseToken)
			assert.Equal(t, ks[i], r.Prev.Key)
		}
	}

	done := make([]*idemstore.Record, len(ks))
	attached := make([][]any, len(ks))
	for i, k := range ks {
		done[i] = completed(inProgress(k, "a", t0), t0)
		if i%2 == 0 {
			attached[i] = []any{l.add("acct", 1, false)}
		}
	}
	var plain []*idemstore.Record
	var withWrites []*idemstore.Record
	var writes [][]any
	for i := range done {
		if attached[i] == nil {
			plain = append(plain, done[i])
		} else {
			withWrites, writes = append(withWrites, done[i]), append(writes, attached[i])
		}
	}
	for i, err := range bs.CompleteMany(ctx, plain) {
		require.NoError(t, err, "record %d", i)
	}
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "five completions: one statement")
	for i, err := range bs.CompleteManyAttached(ctx, withWrites, writes) {
		require.NoError(t, err, "record %d", i)
	}
	assert.Equal(t, map[string]int{"begin": 1, "query": 1, "exec": 5, "commit": 1}, c.take(),
		"five completions with a write each: BEGIN, one statement, the writes, COMMIT")
	assert.Equal(t, 5, l.balance(t, "acct"))

	res = bs.ClaimMany(ctx, claims(ks, "c", t0), t0)
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "replays of ten keys: one statement")
	for i, r := range res {
		require.NoError(t, r.Err)
		assert.False(t, r.Claimed)
		if assert.NotNil(t, r.Prev) {
			assert.Equal(t, idemstore.StatusCompleted, r.Prev.Status, "key %d", i)
			assert.Equal(t, []byte(`{"n":1}`), r.Prev.Data)
		}
	}

	fresh := keys("r", 10)
	bs.ClaimMany(ctx, claims(fresh, "a", t0), t0)
	c.take()
	tokens := make([]string, len(fresh))
	for i := range tokens {
		tokens[i] = "a"
	}
	tokens[3] = "someone else"
	errs := bs.ReleaseMany(ctx, fresh, tokens, t0.Add(time.Second))
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "ten releases: one statement")
	for i, err := range errs {
		if i == 3 {
			require.ErrorIs(t, err, idem.ErrLeaseLost, "a token that owns nothing")
			continue
		}
		require.NoError(t, err, "key %d", i)
	}

	at := t0.Add(2 * time.Minute) // every lease has ended
	res = bs.ClaimMany(ctx, claims(fresh, "d", at), at)
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "takeovers of ten keys: one statement")
	for i, r := range res {
		require.NoError(t, r.Err)
		assert.True(t, r.Claimed, "key %d", i)
	}
	assert.Equal(t, map[string]int{}, c.take())
	assert.Empty(t, bs.ClaimMany(ctx, nil, at))
	assert.Empty(t, bs.CompleteMany(ctx, nil))
	assert.Empty(t, bs.CompleteManyAttached(ctx, nil, nil))
	assert.Empty(t, bs.ReleaseMany(ctx, nil, nil, at))
	assert.Equal(t, map[string]int{}, c.take(), "an empty batch sends nothing")
}

// TestBatchClaimDecidesAsClaim compares ClaimMany with Claim on the same states: each key
// of one batch decided exactly as a claim of its own decides it (a tombstone of the
// claim's own token, a tombstone of another's, a checkpoint carried or not, a resend of
// the owner's own claim, an expired record).
func TestBatchClaimDecidesAsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := t0.Add(2 * time.Minute) // leases of t0 have ended
	cases := []struct {
		name    string
		prepare func(*testing.T, *pgstore.Store, string)
		claim   func(key string) *idemstore.Record
	}{
		{name: "Absent", claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "Live", prepare: claimAt("a", now), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "OwnResend", prepare: claimAt("b", now), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "LeaseEnded", prepare: claimAt("a", t0), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "Completed", prepare: completeAt("a", t0), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "Expired", prepare: completeAt("a", t0.Add(-2*time.Hour)), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "OwnTombstone", prepare: releasedAt("b", "", t0), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "OtherTombstone", prepare: releasedAt("a", "", t0), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "CheckpointNotCarried", prepare: checkpointAt("a", "charged", t0), claim: func(k string) *idemstore.Record { return inProgress(k, "b", now) }},
		{name: "CheckpointCarried", prepare: checkpointAt("a", "charged", t0), claim: func(k string) *idemstore.Record {
			r := inProgress(k, "b", now)
			r.Checkpoint, r.CheckpointSeq = "charged", 1
			return r
		}},
		{name: "CheckpointOtherNumber", prepare: checkpointAt("a", "charged", t0), claim: func(k string) *idemstore.Record {
			r := inProgress(k, "b", now)
			r.Checkpoint, r.CheckpointSeq = "charged", 2
			return r
		}},
		{name: "CheckpointOtherRequest", prepare: checkpointAt("a", "charged", t0), claim: func(k string) *idemstore.Record {
			r := inProgress(k, "b", now)
			r.Checkpoint, r.CheckpointSeq, r.Fingerprint = "charged", 1, "other"
			return r
		}},
		{name: "CheckpointOnTombstone", prepare: releasedAt("a", "charged", t0), claim: func(k string) *idemstore.Record {
			r := inProgress(k, "b", now)
			r.Checkpoint, r.CheckpointSeq = "charged", 1
			return r
		}},
	}
	single, _ := newStore(t, nil)
	batch, _ := newStore(t, nil)
	bs := batchStore(t, batch)
	recs := make([]*idemstore.Record, len(cases))
	want := make([]idemstore.ClaimResult, len(cases))
	for i, tc := range cases {
		if tc.prepare != nil {
			tc.prepare(t, single, tc.name)
			tc.prepare(t, batch, tc.name)
		}
		recs[i] = tc.claim(tc.name)
		want[i].Prev, want[i].Claimed, want[i].Err = single.Claim(ctx, tc.claim(tc.name), now)
		require.NoError(t, want[i].Err, tc.name)
	}
	got := bs.ClaimMany(ctx, recs, now)
	require.Len(t, got, len(cases))
	for i, tc := range cases {
		require.NoError(t, got[i].Err, tc.name)
		assert.Equal(t, want[i].Claimed, got[i].Claimed, "%s: claimed", tc.name)
		assert.Equal(t, want[i].Prev, got[i].Prev, "%s: the refusing record", tc.name)
		a, err := single.Get(ctx, tc.name)
		require.NoError(t, err)
		b, err := batch.Get(ctx, tc.name)
		require.NoError(t, err)
		assert.Equal(t, a, b, "%s: the record left", tc.name)
	}
}

// TestBatchDuplicateKeys hands the batch methods one key twice (the guard never does: its
// batch claim runs duplicates once). Each record is decided as its single counterpart
// would decide it called in turn, rather than the whole statement failing.
func TestBatchDuplicateKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	bs := batchStore(t, s)
	res := bs.ClaimMany(ctx, []*idemstore.Record{inProgress("d", "a", t0), inProgress("e", "a", t0), inProgress("d", "b", t0)}, t0)
	require.Len(t, res, 3)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	require.NoError(t, res[2].Err)
	assert.True(t, res[0].Claimed)
	assert.True(t, res[1].Claimed)
	assert.False(t, res[2].Claimed, "the second claim of d meets the first")
	if assert.NotNil(t, res[2].Prev) {
		assert.Equal(t, "a", res[2].Prev.LeaseToken)
	}
	errs := bs.CompleteMany(ctx, []*idemstore.Record{completed(inProgress("d", "a", t0), t0), completed(inProgress("d", "b", t0), t0)})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], idem.ErrLeaseLost)
	errs = bs.ReleaseMany(ctx, []string{"e", "e"}, []string{"a", "a"}, t0)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], idem.ErrLeaseLost, "released already")
}

// TestBatchAttachedLeaseLost completes a batch with attached writes in which one record's
// lease was taken over meanwhile (its lease ended mid-batch): that record's writes never
// land and it gets [idem.ErrLeaseLost]; the others commit with their writes, once; a
// resend of the whole call (its answer lost) commits nothing twice.
func TestBatchAttachedLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	bs := batchStore(t, s)
	l := newLedger(t, pool)
	ks := keys("k", 3)
	for _, r := range bs.ClaimMany(ctx, claims(ks, "a", t0), t0) {
		require.True(t, r.Claimed)
	}
	later := t0.Add(2 * time.Minute)
	_, claimed, err := s.Claim(ctx, inProgress(ks[1], "taker", later), later)
	require.NoError(t, err)
	require.True(t, claimed, "k-1's lease ended and another owner took it")

	recs := make([]*idemstore.Record, len(ks))
	writes := make([][]any, len(ks))
	for i, k := range ks {
		recs[i] = completed(inProgress(k, "a", t0), t0)
		writes[i] = []any{l.add(k, 10, false)}
	}
	for attempt := range 2 {
		errs := bs.CompleteManyAttached(ctx, recs, writes)
		require.NoError(t, errs[0], "attempt %d", attempt)
		require.ErrorIs(t, errs[1], idem.ErrLeaseLost, "attempt %d", attempt)
		require.NoError(t, errs[2], "attempt %d", attempt)
		for i, k := range ks {
			want := 10
			if i == 1 {
				want = 0
			}
			assert.Equal(t, want, l.balance(t, k), "attempt %d: %s", attempt, k)
		}
	}
	cur, err := s.Get(ctx, ks[1])
	require.NoError(t, err)
	assert.Equal(t, "taker", cur.LeaseToken, "the new owner's record is untouched")
	assert.Equal(t, idemstore.StatusInProgress, cur.Status)
}

// TestBatchAttachedWriteFails completes a batch whose second record's write fails its own
// condition: that record gets an [*pgstore.AttachedWriteError] wrapping
// [idem.ErrConditionFailed] and stays in progress; the others commit, once each.
func TestBatchAttachedWriteFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	bs := batchStore(t, s)
	l := newLedger(t, pool)
	ks := keys("k", 3)
	bs.ClaimMany(ctx, claims(ks, "a", t0), t0)
	recs := make([]*idemstore.Record, len(ks))
	writes := make([][]any, len(ks))
	for i, k := range ks {
		recs[i] = completed(inProgress(k, "a", t0), t0)
		writes[i] = []any{l.add(k, 10, i == 1)}
	}
	errs := bs.CompleteManyAttached(ctx, recs, writes)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], idem.ErrConditionFailed)
	var awe *pgstore.AttachedWriteError
	require.ErrorAs(t, errs[1], &awe)
	assert.Equal(t, 0, awe.Index)
	require.NoError(t, errs[2])
	assert.Equal(t, 10, l.balance(t, ks[0]))
	assert.Equal(t, 0, l.balance(t, ks[1]))
	assert.Equal(t, 10, l.balance(t, ks[2]))
	for i, k := range ks {
		cur, err := s.Get(ctx, k)
		require.NoError(t, err)
		want := idemstore.StatusCompleted
		if i == 1 {
			want = idemstore.StatusInProgress
		}
		assert.Equal(t, want, cur.Status, k)
	}
	errs = bs.CompleteManyAttached(ctx, recs[:1], [][]any{{"not a write"}})
	require.Error(t, errs[0], "a value that is no write fails its record")
}

// TestBatchClaimRacesSingleClaims runs batch claims and single claims of the same keys at
// once, in both orders of keys: every key has one owner, and no statement deadlocks.
func TestBatchClaimRacesSingleClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	bs := batchStore(t, s)
	const rounds, n = 20, 8
	for r := range rounds {
		ks := keys(fmt.Sprintf("r%d", r), n)
		rev := make([]string, n)
		for i := range ks {
			rev[n-1-i] = ks[i]
		}
		var mu sync.Mutex
		owners := map[string][]string{}
		won := func(k, token string) {
			mu.Lock()
			defer mu.Unlock()
			owners[k] = append(owners[k], token)
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				token := fmt.Sprintf("batch%d", w)
				order := ks
				if w%2 == 1 {
					order = rev
				}
				for i, res := range bs.ClaimMany(ctx, claims(order, token, t0), t0) {
					assert.NoError(t, res.Err)
					if res.Claimed {
						won(order[i], token)
					}
				}
			}()
			wg.Add(1)
			go func() {
				defer wg.Done()
				token := fmt.Sprintf("single%d", w)
				for _, k := range ks {
					_, claimed, err := s.Claim(ctx, inProgress(k, token, t0), t0)
					assert.NoError(t, err)
					if claimed {
						won(k, token)
					}
				}
			}()
		}
		wg.Wait()
		for _, k := range ks {
			assert.Len(t, owners[k], 1, "round %d, key %s: one owner", r, k)
		}
	}
}

// TestBatchLateCompletion lands a batch completion's first attempt after a resend already
// completed the records and the keys were claimed again after expiry: it changes nothing.
func TestBatchLateCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	bs := batchStore(t, s)
	ks := keys("k", 3)
	bs.ClaimMany(ctx, claims(ks, "a", t0), t0)
	recs := make([]*idemstore.Record, len(ks))
	for i, k := range ks {
		recs[i] = completed(inProgress(k, "a", t0), t0)
	}
	for _, err := range bs.CompleteMany(ctx, recs) {
		require.NoError(t, err)
	}
	for _, err := range bs.CompleteMany(ctx, recs) {
		require.NoError(t, err, "a resend of a completion that landed")
	}
	later := t0.Add(3 * time.Hour) // the records expired
	for _, r := range bs.ClaimMany(ctx, claims(ks, "b", later), later) {
		require.True(t, r.Claimed)
	}
	for _, err := range bs.CompleteMany(ctx, recs) {
		require.ErrorIs(t, err, idem.ErrLeaseLost, "the first attempt, landing late")
	}
	for _, err := range bs.ReleaseMany(ctx, ks, []string{"a", "a", "a"}, t0) {
		require.ErrorIs(t, err, idem.ErrLeaseLost, "a late release of the old owner")
	}
	for _, k := range ks {
		cur, err := s.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, "b", cur.LeaseToken)
		assert.Equal(t, idemstore.StatusInProgress, cur.Status)
	}
}

// TestBatchCompletionKeepsFirst: a batch completion that meets records completed under
// its tokens already (by Complete, or by an earlier batch: a resend, or a second
// completion under the token with another result) returns nil for each, as Complete does,
// and leaves the first result, in the one statement.
func TestBatchCompletionKeepsFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCounter(nil)
	s, pool := newStore(t, c)
	c.db = pool
	bs := batchStore(t, s)
	ks := keys("k", 4)
	bs.ClaimMany(ctx, claims(ks, "a", t0), t0)
	first := make([]*idemstore.Record, len(ks))
	second := make([]*idemstore.Record, len(ks))
	for i, k := range ks {
		first[i] = completed(inProgress(k, "a", t0), t0)
		second[i] = completed(inProgress(k, "a", t0), t0)
		second[i].Data = []byte(`{"n":2}`)
	}
	require.NoError(t, s.Complete(ctx, first[0], nil))
	require.NoError(t, s.Complete(ctx, first[1], nil))
	for _, err := range bs.CompleteMany(ctx, first[2:]) {
		require.NoError(t, err)
	}
	c.take()
	for i, err := range bs.CompleteMany(ctx, second) {
		assert.NoError(t, err, "record %d: completed under its token already", i)
	}
	assert.Equal(t, map[string]int{"query": 1}, c.take(), "one statement")
	for i, k := range ks {
		cur, err := s.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusCompleted, cur.Status)
		assert.Equal(t, `{"n":1}`, string(cur.Data), "record %d: the first result is kept", i)
	}
}

// TestBatchThroughGuard runs an SQS-shaped batch of ten new keys through the guard's batch
// claim and Settle with attached writes: two store round trips, a claim statement and a
// completion transaction.
func TestBatchThroughGuard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCounter(nil)
	s, pool := newStore(t, c)
	c.db = pool
	l := newLedger(t, pool)
	g, err := idem.New(s, "batch", idem.WithScope("test"))
	require.NoError(t, err)
	reqs := make([]idem.Request, 10)
	for i := range reqs {
		reqs[i] = idem.Request{Key: fmt.Sprint("m", i)}
	}
	c.take()
	b := g.Claim(ctx, reqs)
	for i := range reqs {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (out, error) {
			return out{N: i}, pgstore.Attach(ctx, l.add("acct", 1, false))
		})
		require.NoError(t, err)
	}
	for i, err := range b.Settle(ctx) {
		require.NoError(t, err, "request %d", i)
	}
	assert.Equal(t, map[string]int{"query": 2, "begin": 1, "exec": 10, "commit": 1}, c.take())
	assert.Equal(t, 10, l.balance(t, "acct"))
}

// TestBatchAttachedConnectionBreaks kills the completion's connection while the second
// record's write runs (a crash of the server backend, or a network break): nothing of the
// transaction committed, so each record is completed alone, and every effect lands once.
func TestBatchAttachedConnectionBreaks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	bs := batchStore(t, s)
	e := newEffects(t, pool)
	ks := keys("k", 3)
	bs.ClaimMany(ctx, claims(ks, "a", t0), t0)
	recs := make([]*idemstore.Record, len(ks))
	writes := make([][]any, len(ks))
	var killed atomic.Bool
	for i, k := range ks {
		recs[i] = completed(inProgress(k, "a", t0), t0)
		writes[i] = []any{e.write(k, 1)}
	}
	writes[1] = []any{pgstore.Write(func(ctx context.Context, tx pgx.Tx) error {
		if !killed.Swap(true) {
			_, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, tx.Conn().PgConn().PID())
			require.NoError(t, err)
		}
		return e.write(ks[1], 1)(ctx, tx)
	})}
	for i, err := range bs.CompleteManyAttached(ctx, recs, writes) {
		require.NoError(t, err, "record %d", i)
	}
	require.True(t, killed.Load())
	runs := e.runs(t)
	for _, k := range ks {
		assert.Equal(t, []int64{1}, runs[k], k)
		cur, err := s.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusCompleted, cur.Status, k)
	}
}

// TestBatchAttachedWriteEndsTransaction runs a batch whose second record's write commits
// the completion's transaction itself (a misuse [pgstore.Attach] forbids). Its record is
// answered as a single completion's would be; the others get store failures, no verdicts,
// and the guard's resend of each alone (Complete) finds it completed: the records before
// the misbehaving write committed with their writes, the one after it without.
func TestBatchAttachedWriteEndsTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t, nil)
	bs := batchStore(t, s)
	e := newEffects(t, pool)
	ks := keys("k", 3)
	bs.ClaimMany(ctx, claims(ks, "a", t0), t0)
	recs := make([]*idemstore.Record, len(ks))
	writes := make([][]any, len(ks))
	for i, k := range ks {
		recs[i] = completed(inProgress(k, "a", t0), t0)
		writes[i] = []any{e.write(k, 1)}
	}
	writes[1] = []any{pgstore.Write(func(ctx context.Context, tx pgx.Tx) error {
		if err := e.write(ks[1], 1)(ctx, tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "COMMIT")
		return err
	})}
	errs := bs.CompleteManyAttached(ctx, recs, writes)
	var ended *pgstore.TxEndedError
	require.ErrorAs(t, errs[1], &ended)
	assert.Equal(t, 0, ended.Index)
	for _, i := range []int{0, 2} {
		require.ErrorIs(t, errs[i], idem.ErrStore, "record %d: no verdict", i)
		require.NoError(t, s.Complete(ctx, recs[i], writes[i]), "record %d: the resend finds it completed", i)
	}
	assert.Equal(t, map[string][]int64{ks[0]: {1}, ks[1]: {1}}, e.runs(t))
}

// TestBatchClaimRefusedByConcurrentWriter interleaves a batch claim with a transaction of
// single claims that holds two of its keys: one key's lease-ended record it takes over,
// the other key it creates. The batch claim waits for their row locks and, once they
// commit, returns for each the record that refused it as committed (the one its statement
// could not see, by claiming that key again alone), and claims its third key.
func TestBatchClaimRefusedByConcurrentWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCounter(nil)
	s, pool := newStore(t, c)
	c.db = pool
	bs := batchStore(t, s)
	claimAt("a", t0)(t, s, "old")
	now := t0.Add(2 * time.Minute) // a's lease has ended

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	other, err := pgstore.New(tx, s.Table())
	require.NoError(t, err)
	for _, k := range []string{"old", "created"} {
		_, claimed, err := other.Claim(ctx, inProgress(k, "other", now), now)
		require.NoError(t, err)
		require.True(t, claimed, k)
	}

	c.take()
	done := make(chan []idemstore.ClaimResult, 1)
	go func() { done <- bs.ClaimMany(ctx, claims([]string{"old", "created", "free"}, "b", now), now) }()
	waitForLockWait(t, pool, s.Table())
	require.NoError(t, tx.Commit(ctx))
	res := <-done
	for i, k := range []string{"old", "created"} {
		require.NoError(t, res[i].Err, k)
		assert.False(t, res[i].Claimed, k)
		if assert.NotNil(t, res[i].Prev, "%s: the refusing record comes back", k) {
			assert.Equal(t, "other", res[i].Prev.LeaseToken, "%s: as committed", k)
		}
	}
	require.NoError(t, res[2].Err)
	assert.True(t, res[2].Claimed)
	assert.Equal(t, 2, c.take()["query"], "the batch statement, and the claim of the key it could not see")
}
