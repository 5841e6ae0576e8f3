package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// readFailingStore is a refusingStore whose Get fails while failGets is above zero.
type readFailingStore struct {
	*refusingStore
	gmu      sync.Mutex
	failGets int
}

func (s *readFailingStore) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	s.gmu.Lock()
	fail := s.failGets > 0
	if fail {
		s.failGets--
	}
	s.gmu.Unlock()
	if fail {
		return nil, errConnReset
	}
	return s.refusingStore.Get(ctx, key)
}

// TestRefusedReadBackFailsAnswersOutcomeUnknown: the completion's first attempt is held
// (its response lost, as an SDK resend's first attempt); the resend is refused for good
// (funds short); a deposit lands and the held first attempt commits (debit + record
// completed with "201"). The guard's read of the record, meant to tell "completed after
// all", then fails once. Whether the debit committed is not known, so the caller must not
// be told the refusal (IsRefused: nothing committed), nor get the chosen "402": it gets
// outcome unknown (OpCommit), with the handler's result, and a retry replays "201".
// Without OnRefused the read follows the fencing release, which answers lease lost; with
// it, the completion with the chosen result, which finds the record completed.
func TestRefusedReadBackFailsAnswersOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, chosen := range []bool{false, true} {
		const key = "pay-1"
		rs := &refusingStore{Store: &memstore.Store{}}
		s := &readFailingStore{refusingStore: rs}
		acct := &account{}
		clock := storetest.NewSettableClock()
		g, err := idem.New(s, "pay", idem.WithClock(clock))
		require.NoError(t, err)
		runs := 0
		pay := func() (string, bool, error) {
			return idem.Do(context.Background(), g, idem.Request{Key: key, Fingerprint: []byte("100")}, func(ctx context.Context) (string, error) {
				runs++
				if err := idem.Attach(ctx, acct.debit(100)); err != nil {
					return "", err
				}
				if !chosen {
					return "201", nil
				}
				return "201", idem.OnRefused(ctx, func(_ context.Context, err error) (any, bool) {
					var fe *fundsError
					return "402", errors.As(err, &fe)
				})
			})
		}
		rs.holdFirst = true
		land := func(st *refusingStore) {
			st.mu.Lock()
			held := st.held != nil
			st.mu.Unlock()
			if !held {
				return
			}
			acct.mu.Lock()
			acct.balance = 100 // a deposit lands between the attempts
			acct.mu.Unlock()
			require.NoError(t, st.apply(context.Background())) // the first attempt commits
			s.gmu.Lock()
			s.failGets = 1 // the read that would find it completed fails once
			s.gmu.Unlock()
		}
		rs.beforeRelease, rs.beforePlain = land, land
		v1, _, err1 := pay()
		require.Zero(t, acct.get(), "chosen %v: the first attempt committed the debit", chosen)
		assert.False(t, idem.IsRefused(err1), "chosen %v: IsRefused says nothing committed, but the debit committed: %v", chosen, err1)
		var se *idem.StoreError
		require.ErrorAs(t, err1, &se, "chosen %v", chosen)
		assert.Equal(t, idem.OpCommit, se.Op, "chosen %v: outcome unknown", chosen)
		v2, replayed, err2 := pay()
		require.NoError(t, err2)
		assert.True(t, replayed)
		assert.Equal(t, "201", v2, "the stored result")
		assert.Equal(t, v2, v1, "chosen %v: the first caller was answered %q, the retry %q", chosen, v1, v2)
		assert.Equal(t, 1, runs)
	}
}

// TestOnRefusedIgnoredInEveryBatch: OnRefused's doc says it applies to Do and that a
// batch releases such a key. A batch of two keys releases it; so must a batch holding a
// single key (Claim claims nothing, DoClaimed behaves as Do), the most common batch (an
// SQS batch of one message): the same handler and refusal, one outcome whatever the
// batch's size.
func TestOnRefusedIgnoredInEveryBatch(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2} {
		ms := &memstore.Store{}
		g, err := idem.New(ms, "pay", idem.WithClock(storetest.NewSettableClock()))
		require.NoError(t, err)
		acct := &account{}
		reqs := []idem.Request{{Key: "pay-1"}, {Key: "pay-2"}}[:n]
		b := g.Claim(context.Background(), reqs)
		v, _, err := idem.DoClaimed(context.Background(), b, 0, func(ctx context.Context) (string, error) {
			if err := idem.Attach(ctx, acct.debit(100)); err != nil {
				return "", err
			}
			return "201", idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return "402", true })
		})
		for i := 1; i < n; i++ {
			_, _, _ = idem.DoClaimed(context.Background(), b, i, func(context.Context) (string, error) { return "ok", nil })
		}
		b.Settle(context.Background())
		k, kerr := g.StoredKey(reqs[0])
		require.NoError(t, kerr)
		rec, gerr := ms.Get(context.Background(), k)
		require.NoError(t, gerr)
		require.NotNil(t, rec)
		assert.True(t, rec.Released(), "batch of %d: the doc says a batch releases the key; got status %s, answer %q, err %v", n, rec.Status, v, err)
	}
}

// TestOnRefusedNeverCompletesOverAnotherRun: the first caller's OnRefused function is
// slow (a pause, a throttled call), and its lease ends meanwhile. Retry B takes the key
// over, charges the card and records it with a checkpoint ("charged"), then crashes; B's
// lease ends too. The first caller's completion with the chosen "402" must not land on
// B's record (as the claim of the earlier design could, taking B's record over with its
// checkpoint): it answers lease lost, and a retry resumes B's run from "charged".
func TestOnRefusedNeverCompletesOverAnotherRun(t *testing.T) {
	t.Parallel()
	const key = "pay-1"
	rs := &refusingStore{Store: &memstore.Store{}}
	acct := &account{}
	clock := storetest.NewSettableClock()
	g, err := idem.New(rs, "pay", idem.WithClock(clock))
	require.NoError(t, err)
	resumedFrom := ""
	var once sync.Once
	bTakesOver := func() {
		ctx := context.Background()
		k, err := g.StoredKey(idem.Request{Key: key})
		require.NoError(t, err)
		cur, err := rs.Store.Get(ctx, k)
		require.NoError(t, err)
		clock.Advance(2 * time.Minute) // the first caller's lease ends
		now := clock.Now()
		b := &idemstore.Record{Key: k, Status: idemstore.StatusInProgress, LeaseToken: "b",
			LeaseExpires: now.Add(time.Minute), Expires: now.Add(24 * time.Hour),
			Fingerprint: cur.Fingerprint, Version: idemstore.SchemaVersion}
		_, claimed, err := rs.Store.Claim(ctx, b, now)
		require.NoError(t, err)
		require.True(t, claimed, "B takes the key over")
		require.NoError(t, rs.Store.SetCheckpoint(ctx, k, "b", "charged", 1), "B charges the card and records it")
		clock.Advance(2 * time.Minute) // B crashed; its lease ends
	}
	pay := func() (string, bool, error) {
		return idem.Do(context.Background(), g, idem.Request{Key: key, Fingerprint: []byte("100")}, func(ctx context.Context) (string, error) {
			resumedFrom = idem.LastCheckpoint(ctx)
			if resumedFrom == "charged" {
				return "201", nil // B's run, resumed: the card was charged
			}
			if err := idem.Attach(ctx, acct.debit(100)); err != nil {
				return "", err
			}
			return "201", idem.OnRefused(ctx, func(context.Context, error) (any, bool) {
				once.Do(bTakesOver)
				return "402", true
			})
		})
	}
	v1, _, err1 := pay()
	require.ErrorIs(t, err1, idem.ErrLeaseLost, "the first caller: %q", v1)
	assert.False(t, idem.IsRefused(err1))
	v2, replayed, err2 := pay()
	require.NoError(t, err2)
	assert.False(t, replayed)
	assert.Equal(t, "201", v2)
	assert.Equal(t, "charged", resumedFrom, "a retry must resume B's run from its checkpoint")
}
