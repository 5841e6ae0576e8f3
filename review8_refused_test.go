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

// review8Store is a refusingStore whose Get fails while failGets is above zero.
type review8Store struct {
	*refusingStore
	gmu      sync.Mutex
	failGets int
}

func (s *review8Store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
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

// TestReview8_RefusedLateAttemptCommitsReadBackFails: the completion's first attempt is
// held (its response lost, as an SDK resend's first attempt); the resend is refused for
// good (funds short); a deposit lands and the held first attempt commits (debit + record
// completed with "201") before the fencing release. The release then answers
// ErrLeaseLost, and the guard's read of the record, meant to tell "completed after all",
// fails once (a throttled or broken GetItem). releaseUncommitted treats that as
// "released", the refusal stands, OnRefused's result "402" is returned with an error that
// IsRefused ("nothing committed") - while the debit committed and a retry replays "201".
func TestReview8_RefusedLateAttemptCommitsReadBackFails(t *testing.T) {
	t.Parallel()
	const key = "pay-1"
	rs := &refusingStore{Store: &memstore.Store{}}
	s := &review8Store{refusingStore: rs}
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
			return "201", idem.OnRefused(ctx, func(_ context.Context, err error) (any, bool) {
				var fe *fundsError
				return "402", errors.As(err, &fe)
			})
		})
	}
	rs.holdFirst = true
	rs.beforeRelease = func(st *refusingStore) {
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
	v1, _, err1 := pay()
	debited := acct.get() == 0
	require.True(t, debited, "the first attempt committed the debit")
	assert.False(t, idem.IsRefused(err1), "IsRefused says nothing committed, but the debit committed: %v", err1)
	v2, replayed, err2 := pay()
	require.NoError(t, err2)
	assert.True(t, replayed)
	assert.Equal(t, "201", v2, "the stored result")
	assert.Equal(t, v2, v1, "the first caller was answered %q (the chosen refusal), the retry %q", v1, v2)
	assert.Equal(t, 1, runs)
}

// TestReview8_BatchOfOneStoresOnRefused: OnRefused's doc says it applies to Do and that
// "a batch (Guard.Claim) releases such a key". A batch of two keys does release it; a
// batch holding a single key (Claim claims nothing, DoClaimed behaves as Do) stores the
// chosen result instead. The same handler, the same refusal, two outcomes by batch size:
// the doc is untrue for the most common batch (an SQS batch of one message).
func TestReview8_BatchOfOneStoresOnRefused(t *testing.T) {
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

// TestReview8_ReclaimTakesOverAnotherRunsCheckpoint: after the fencing release, and before
// the guard's new claim, the client's retry B claims the released key, charges the card
// and records it with a checkpoint ("charged"), then crashes; B's lease ends (the first
// caller was slow between its release and its claim: its OnRefused function, a throttled
// claim, a pause). The first caller's claim for the chosen result then takes B's
// lease-ended record over, as a takeover may, carrying B's checkpoint, but instead of
// resuming B's run it completes the key with its own "402" without running anything.
// B's recorded effects are dropped: every retry replays "payment refused" for a card that
// was charged, where any other takeover would resume from "charged".
func TestReview8_ReclaimTakesOverAnotherRunsCheckpoint(t *testing.T) {
	t.Parallel()
	const key = "pay-1"
	rs := &refusingStore{Store: &memstore.Store{}}
	acct := &account{}
	clock := storetest.NewSettableClock()
	g, err := idem.New(rs, "pay", idem.WithClock(clock))
	require.NoError(t, err)
	resumedFrom := ""
	pay := func() (string, bool, error) {
		return idem.Do(context.Background(), g, idem.Request{Key: key, Fingerprint: []byte("100")}, func(ctx context.Context) (string, error) {
			resumedFrom = idem.LastCheckpoint(ctx)
			if resumedFrom == "charged" {
				return "201", nil // B's run, resumed: the card was charged
			}
			if err := idem.Attach(ctx, acct.debit(100)); err != nil {
				return "", err
			}
			return "201", idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return "402", true })
		})
	}
	var once sync.Once
	rs.afterRelease = func(st *refusingStore) {
		once.Do(func() {
			ctx := context.Background()
			k, err := g.StoredKey(idem.Request{Key: key})
			require.NoError(t, err)
			tomb, err := st.Store.Get(ctx, k)
			require.NoError(t, err)
			now := clock.Now()
			b := &idemstore.Record{Key: k, Status: idemstore.StatusInProgress, LeaseToken: "b",
				LeaseExpires: now.Add(time.Minute), Expires: now.Add(24 * time.Hour),
				Fingerprint: tomb.Fingerprint, Version: idemstore.SchemaVersion}
			_, claimed, err := st.Store.Claim(ctx, b, now)
			require.NoError(t, err)
			require.True(t, claimed, "B claims the released key")
			require.NoError(t, st.Store.SetCheckpoint(ctx, k, "b", "charged", 1), "B charges the card and records it")
			clock.Advance(2 * time.Minute) // B crashed; its lease ends
		})
	}
	v1, _, err1 := pay()
	t.Logf("first caller: %q, %v", v1, err1)
	v2, replayed, err2 := pay()
	require.NoError(t, err2)
	assert.False(t, replayed && v2 == "402", "the retry replays the first caller's 402 over B's charged card")
	assert.Equal(t, "charged", resumedFrom, "a retry must resume B's run from its checkpoint")
}
