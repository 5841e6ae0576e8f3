package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// An attached write that panics (a handler's bug) runs inside the store's completion. On
// the caller's goroutine (Do, DoClaimed recording at once) the panic goes on, as a
// handler's does, but only after the guard has read the record back and released the key;
// in Batch.Settle, which completes attached writes on a goroutine of its own, it is
// recovered as the request's failure (*idem.AttachPanicError), and the process stays up.

// panicky is an attached write that panics.
func panicky() error { panic("the handler's bug: index out of range in the write") }

// TestDoReleasesTheKeyWhenAnAttachedWritePanics: the panic goes on to Do's caller, and the
// key is released (nothing committed), so a retry runs again rather than meeting the key in
// progress until its lease ends.
func TestDoReleasesTheKeyWhenAnAttachedWritePanics(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"))
	require.NoError(t, err)
	req := idem.Request{Key: "k"}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_, _, _ = idem.Do(context.Background(), g, req, func(ctx context.Context) (int, error) {
			return 1, idem.Attach(ctx, panicky)
		})
	}()
	assert.Equal(t, "the handler's bug: index out of range in the write", recovered, "the panic goes on, as it was")
	runs := 0
	v, replayed, err := idem.Do(context.Background(), g, req, func(context.Context) (int, error) {
		runs++
		return 2, nil
	})
	require.NoError(t, err, "the key was released")
	assert.Equal(t, 1, runs)
	assert.False(t, replayed)
	assert.Equal(t, 2, v)
}

// settleAttached claims keys in one batch under a deadline the lease outlasts, runs each
// request's handler with DoClaimed (attaching what writes[i] gives, if any), and settles.
func settleAttached(t *testing.T, g *idem.Guard, keys []string, writes []func() error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqs := make([]idem.Request, len(keys))
	for i, k := range keys {
		reqs[i] = idem.Request{Key: k}
	}
	b := g.Claim(ctx, reqs)
	for i := range keys {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (int, error) {
			if writes[i] == nil {
				return i, nil
			}
			return i, idem.Attach(ctx, writes[i])
		})
		require.NoError(t, err, "request %d: its outcome waits for Settle", i)
	}
	return b.Settle(ctx)
}

// TestSettleRecoversAPanickingAttachedWrite: Settle completes the attached writes of a
// batch in one store call on a goroutine of its own. A write that panics there is
// recovered: its request fails with an *idem.AttachPanicError and its key is released; the
// other requests of the call, whose outcomes are unknown too, are completed alone, their
// writes run once; the store's lock is free again.
func TestSettleRecoversAPanickingAttachedWrite(t *testing.T) {
	t.Parallel()
	for _, poisonFirst := range []bool{true, false} {
		name := "poison last"
		if poisonFirst {
			name = "poison first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			var released atomic.Int32
			g, err := idem.New(s, "test", idem.WithScope("test"), idem.WithHooks(idem.Hooks{
				OnReleased: func(context.Context, idem.Event) { released.Add(1) },
			}))
			require.NoError(t, err)
			var fine atomic.Int32
			write := func() error { fine.Add(1); return nil }
			keys, writes, poison, other := []string{"p", "f"}, []func() error{panicky, write}, 0, 1
			if !poisonFirst {
				keys, writes, poison, other = []string{"f", "p"}, []func() error{write, panicky}, 1, 0
			}
			errs := settleAttached(t, g, keys, writes)
			var ap *idem.AttachPanicError
			require.ErrorAs(t, errs[poison], &ap)
			assert.Equal(t, "the handler's bug: index out of range in the write", ap.Value)
			assert.NotEmpty(t, ap.Stack)
			assert.NotErrorIs(t, errs[poison], idemstore.ErrNotCommitted, "the handler's failure, not the store's")
			assert.NoError(t, errs[other], "the request beside it")
			assert.EqualValues(t, 1, fine.Load(), "the other request's write ran once")
			assert.EqualValues(t, 1, released.Load(), "the poison's key released")

			// The store answers (its lock is free), the poison's key runs again, the other
			// replays.
			runs := 0
			_, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (int, error) {
				runs++
				return 0, nil
			})
			require.NoError(t, err)
			assert.False(t, replayed)
			assert.Equal(t, 1, runs)
			_, replayed, err = idem.Do(context.Background(), g, idem.Request{Key: "f"}, func(context.Context) (int, error) {
				runs++
				return 0, nil
			})
			require.NoError(t, err)
			assert.True(t, replayed)
			assert.Equal(t, 1, runs)
		})
	}
}

// TestSettleRecoversAPanickingAttachedWriteAlone: the store call of Settle held the
// poison's record alone (the other request attached nothing): it is read back, not sent
// again, so its writes run once.
func TestSettleRecoversAPanickingAttachedWriteAlone(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"))
	require.NoError(t, err)
	var calls atomic.Int32
	errs := settleAttached(t, g, []string{"p", "plain"}, []func() error{func() error {
		calls.Add(1)
		return panicky()
	}, nil})
	var ap *idem.AttachPanicError
	require.ErrorAs(t, errs[0], &ap)
	assert.NoError(t, errs[1])
	assert.EqualValues(t, 1, calls.Load(), "a panicking write alone in its call is not sent again")
}

// completedThenPanics is a store whose batch completion with attached writes commits and
// then panics: the guard must read the record back rather than take the panic for nothing
// committed.
type completedThenPanics struct{ *memstore.Store }

func (s completedThenPanics) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	s.Store.CompleteManyAttached(ctx, recs, attached)
	panic("the store's bug, after its commit")
}

// TestSettleReadsBackAfterAPanic: a panic in the store call says nothing of what
// committed; a record completed under its token is a success.
func TestSettleReadsBackAfterAPanic(t *testing.T) {
	t.Parallel()
	g, err := idem.New(completedThenPanics{memstore.New()}, "test", idem.WithScope("test"))
	require.NoError(t, err)
	var calls atomic.Int32
	write := func() error { calls.Add(1); return nil }
	errs := settleAttached(t, g, []string{"a", "b"}, []func() error{write, write})
	assert.Equal(t, []error{nil, nil}, errs, "both committed before the panic")
	assert.EqualValues(t, 2, calls.Load(), "each write ran once: the resends found their records completed")
}

// TestWatchdogRecoversAPanickingHook: a hook the lease watchdog fires (OnLeaseLost, as the
// lease runs out) runs on the watchdog's goroutine, where no caller could recover its
// panic: the panic is recovered, and the handler's context still ends with its lease.
func TestWatchdogRecoversAPanickingHook(t *testing.T) {
	t.Parallel()
	clock := storetest.NewSimulatedClock()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"), idem.WithClock(clock), idem.WithLease(time.Minute),
		idem.WithHooks(idem.Hooks{OnLeaseLost: func(context.Context, idem.Event) { panic("the hook's bug") }}))
	require.NoError(t, err)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(hctx context.Context) (int, error) {
		awaitCancel(t, clock, hctx)
		return 0, context.Cause(hctx)
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost, "the handler's context ended with its lease")
}
