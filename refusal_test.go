package idem_test

import (
	"context"
	"errors"
	"strings"
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

// storeRefusal is a store's typed error for a refused attached write, as pgstore's and
// dynamo's AttachedWriteError are.
type storeRefusal struct {
	permanent bool
	err       error
}

func (e *storeRefusal) Error() string   { return "attached write 0: " + e.err.Error() }
func (e *storeRefusal) Unwrap() error   { return e.err }
func (e *storeRefusal) Permanent() bool { return e.permanent }
func (e *storeRefusal) Reason() string  { return "code 23514 (write 0)" }

// refusingStore is a memstore whose Complete with attached writes can be held (its
// response lost, applied later), and whose Release and plain Complete can be intercepted.
type refusingStore struct {
	idemstore.Store
	mu sync.Mutex
	// holdFirst holds the first Complete with attached writes: it is not applied, and
	// answers a lost response; apply applies it.
	holdFirst bool
	held      func(context.Context) error
	// beforeRelease and afterRelease run around each Release.
	beforeRelease, afterRelease func(s *refusingStore)
	// beforePlain runs before each Complete without attached writes.
	beforePlain func(s *refusingStore)
	// failPlain fails every Complete without attached writes.
	failPlain bool
	plain     int // Completes without attached writes
}

func (s *refusingStore) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.mu.Lock()
	if len(attached) == 0 {
		s.plain++
		fail, before := s.failPlain, s.beforePlain
		s.mu.Unlock()
		if before != nil {
			before(s)
		}
		if fail {
			return errConnReset
		}
		return s.Store.Complete(ctx, rec, attached)
	}
	if s.holdFirst {
		s.holdFirst = false
		r := *rec
		s.held = func(ctx context.Context) error { return s.Store.Complete(ctx, &r, attached) }
		s.mu.Unlock()
		return errConnReset // the request is on its way; its response is lost
	}
	s.mu.Unlock()
	return s.Store.Complete(ctx, rec, attached)
}

func (s *refusingStore) apply(ctx context.Context) error {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	return held(ctx)
}

func (s *refusingStore) Release(ctx context.Context, key, token string, now time.Time) error {
	if s.beforeRelease != nil {
		s.beforeRelease(s)
	}
	err := s.Store.Release(ctx, key, token, now)
	if s.afterRelease != nil {
		s.afterRelease(s)
	}
	return err
}

// account is a business item an attached write debits, refusing when funds are short.
type account struct {
	mu      sync.Mutex
	balance int
}

func (a *account) debit(n int) func() error {
	return func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.balance < n {
			return &fundsError{account: "acct-1"}
		}
		a.balance -= n
		return nil
	}
}

func (a *account) get() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.balance
}

// TestOnRefused: a handler whose attached write the store refuses for good has the result
// it chose with OnRefused stored, and a retry replays it without running again; a
// retryable refusal, or none chosen, releases the key as before; and the result is stored
// under the same lease, conditional on the record being in progress: an SDK resend's first
// attempt landing before it leaves the key completed with the handler's own result, one
// landing after it commits nothing, a request meanwhile meets the key in progress, and a
// completion of the chosen result that fails answers outcome unknown and leaves the key
// to a retry after the lease, which meets the refusal again.
func TestOnRefused(t *testing.T) {
	t.Parallel()
	const key = "pay-1"
	type env struct {
		s     *refusingStore
		acct  *account
		clock *storetest.SettableClock
		g     *idem.Guard
		runs  int
		asked int // calls of the OnRefused function
	}
	setup := func(t *testing.T) *env {
		e := &env{s: &refusingStore{Store: &memstore.Store{}}, acct: &account{}, clock: storetest.NewSettableClock()}
		var err error
		e.g, err = idem.New(e.s, "pay", idem.WithClock(e.clock))
		require.NoError(t, err)
		return e
	}
	// pay debits 100 with an attached write, and chooses "402" should it be refused.
	pay := func(e *env, write func() error) (string, bool, error) {
		return idem.Do(context.Background(), e.g, idem.Request{Key: key, Fingerprint: []byte("100")}, func(ctx context.Context) (string, error) {
			e.runs++
			if err := idem.Attach(ctx, write); err != nil {
				return "", err
			}
			return "201", idem.OnRefused(ctx, func(_ context.Context, err error) (any, bool) {
				e.asked++
				var fe *fundsError
				return "402", errors.As(err, &fe)
			})
		})
	}
	stored := func(t *testing.T, e *env) *idemstore.Record {
		t.Helper()
		k, err := e.g.StoredKey(idem.Request{Key: key})
		require.NoError(t, err)
		rec, err := e.s.Get(context.Background(), k)
		require.NoError(t, err)
		return rec
	}

	t.Run("refused for good: the chosen result is stored and replayed", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		v, replayed, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.False(t, replayed)
		e.acct.balance = 100 // funds arrive: the retry still gets the first answer
		v, replayed, err = pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.True(t, replayed)
		assert.Equal(t, 1, e.runs, "the retry does not run again")
		assert.Equal(t, 100, e.acct.get(), "nothing debited")
	})

	t.Run("the store's typed refusal, permanent", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		refuse := func() error {
			return &storeRefusal{permanent: true, err: &fundsError{account: "acct-1"}}
		}
		v, _, err := pay(e, refuse)
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.Equal(t, 1, e.asked)
	})

	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"retryable: not committed", func() error {
			return errors.Join(idemstore.ErrNotCommitted, &storeRefusal{err: &fundsError{}})
		}},
		{"retryable: the store's refusal is not permanent", func() error {
			return &storeRefusal{err: &fundsError{}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			_, _, err := pay(e, tc.write)
			require.Error(t, err)
			assert.False(t, idem.IsRefused(err))
			assert.Zero(t, e.asked, "not asked: a retry may succeed")
			v, _, err := pay(e, e.acct.debit(0))
			require.NoError(t, err)
			assert.Equal(t, "201", v)
			assert.Equal(t, 2, e.runs, "the key was released: the retry ran")
		})
	}

	t.Run("none chosen: released as before", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		_, _, err := idem.Do(context.Background(), e.g, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
			return "201", idem.Attach(ctx, e.acct.debit(100))
		})
		require.ErrorIs(t, err, idem.ErrConditionFailed)
		assert.True(t, idem.IsRefused(err))
		assert.True(t, strings.HasPrefix(stored(t, e).LeaseToken, "released:"), "released")
	})

	t.Run("the first attempt lands before the chosen completion", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.s.holdFirst = true
		e.s.beforePlain = func(s *refusingStore) {
			s.mu.Lock()
			held := s.held != nil
			s.mu.Unlock()
			if !held {
				return
			}
			e.acct.mu.Lock()
			e.acct.balance = 100 // a deposit lands between the attempts
			e.acct.mu.Unlock()
			require.NoError(t, s.apply(context.Background()))
		}
		v, replayed, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "201", v, "completed with the handler's own result after all")
		assert.False(t, replayed)
		assert.Equal(t, 1, e.asked, "asked, but its result is not the key's")
		assert.Zero(t, e.acct.get(), "debited once")
		v, replayed, err = pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "201", v)
		assert.True(t, replayed)
	})

	t.Run("the first attempt lands after the chosen completion", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.s.holdFirst = true
		v, _, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		e.acct.balance = 100
		require.NoError(t, e.s.apply(context.Background()), "a completion meeting the record completed under its token")
		assert.Equal(t, 100, e.acct.get(), "nothing debited: the record is no longer in progress")
		v, replayed, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.True(t, replayed)
	})

	t.Run("another request meanwhile meets the key in progress", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		var otherErr error
		e.s.beforePlain = func(*refusingStore) {
			_, _, otherErr = idem.Do(context.Background(), e.g, idem.Request{Key: key, Fingerprint: []byte("100")}, func(context.Context) (string, error) {
				e.runs++
				return "201", nil
			})
		}
		v, _, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		require.ErrorIs(t, otherErr, idem.ErrInProgress, "the key was never released")
		assert.Equal(t, 1, e.runs)
		v, replayed, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.True(t, replayed)
	})

	t.Run("crash: the chosen result's completion fails", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.s.failPlain = true
		v, _, err := pay(e, e.acct.debit(100))
		require.ErrorIs(t, err, idem.ErrStore)
		var se *idem.StoreError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, idem.OpCommit, se.Op, "outcome unknown")
		assert.False(t, idem.IsRefused(err))
		assert.Equal(t, "201", v, "the handler's result, with the error: the chosen one is not the key's")
		assert.Equal(t, idemstore.StatusInProgress, stored(t, e).Status, "held by the lease")
		e.s.mu.Lock()
		e.s.failPlain = false
		e.s.mu.Unlock()
		e.clock.Advance(time.Hour) // the lease ends
		v, replayed, err := pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.False(t, replayed, "ran again, and was refused again")
		assert.Equal(t, 2, e.runs)
		v, replayed, err = pay(e, e.acct.debit(100))
		require.NoError(t, err)
		assert.Equal(t, "402", v)
		assert.True(t, replayed)
		assert.Equal(t, 2, e.runs)
	})
}
