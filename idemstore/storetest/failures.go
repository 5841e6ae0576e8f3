package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

func (h Harness) storeFailures(t *testing.T) {
	outage := errors.New("injected outage")
	ctx := context.Background()
	newFaulty := func(t *testing.T, opts ...idem.Option) (*Faulty, *idem.Guard, *SettableClock) {
		s := NewFaulty(h.NewStore(t))
		c := NewSettableClock()
		g, err := idem.New(s, "test", append([]idem.Option{idem.WithClock(c), idem.WithScope("suite")}, opts...)...)
		require.NoError(t, err)
		return s, g, c
	}
	t.Run("ClaimFailsClosed", func(t *testing.T) {
		s, g, _ := newFaulty(t)
		s.Fail("claim", outage, false)
		runs := 0
		_, _, err := do(h, ctx, g, idem.Request{Key: key(t)}, func(context.Context) (result, error) { runs++; return result{}, nil })
		require.ErrorIs(t, err, idem.ErrStore)
		require.ErrorIs(t, err, outage)
		assert.Zero(t, runs)
	})
	t.Run("ClaimFailsOpen", func(t *testing.T) {
		s, g, _ := newFaulty(t, idem.WithFailOpen(true))
		s.Fail("claim", outage, false)
		v, replayed, err := do(h, ctx, g, idem.Request{Key: key(t)}, func(context.Context) (result, error) { return result{N: 5}, nil })
		require.NoError(t, err)
		assert.False(t, replayed)
		assert.Equal(t, 5, v.N)
	})
	t.Run("ClaimAppliedResponseLost", func(t *testing.T) {
		s, g, c := newFaulty(t, idem.WithLease(time.Minute))
		k := key(t)
		s.Fail("claim", outage, true)
		runs := 0
		fn := func(context.Context) (result, error) { runs++; return result{N: runs}, nil }
		_, _, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idem.ErrStore)
		s.Fail("claim", nil, false)
		_, _, err = do(h, ctx, g, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idem.ErrInProgress, "the orphaned claim holds the key until its lease ends")
		c.Advance(time.Minute + idem.DefaultLeaseMargin + time.Second) // past the lease
		v, _, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 1, runs)
	})
	t.Run("CompleteFails", func(t *testing.T) {
		s, g, c := newFaulty(t, idem.WithLease(time.Minute))
		k := key(t)
		s.Fail("complete", outage, false)
		runs := 0
		fn := func(context.Context) (result, error) { runs++; return result{N: runs}, nil }
		_, _, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idem.ErrStore)
		require.ErrorIs(t, err, outage)
		s.Fail("complete", nil, false)
		_, _, err = do(h, ctx, g, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idem.ErrInProgress, "no second run within the lease")
		assert.Equal(t, 1, runs)
		c.Advance(time.Minute + idem.DefaultLeaseMargin + time.Second) // past the lease
		_, _, err = do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.Equal(t, 2, runs, "after the lease the work runs again: its outcome was never recorded")
	})
	t.Run("CompleteFailsThenSucceeds", func(t *testing.T) {
		s, g, _ := newFaulty(t)
		k := key(t)
		s.FailTimes("complete", outage, false, 2)
		runs := 0
		fn := func(context.Context) (result, error) { runs++; return result{N: runs}, nil }
		v, replayed, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err, "the completion is sent again")
		assert.False(t, replayed)
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 3, s.Calls("complete"))
		v, replayed, err = do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 1, runs)
	})
	t.Run("CompleteAppliedResponseLost", func(t *testing.T) {
		s, g, _ := newFaulty(t)
		k := key(t)
		s.Fail("complete", outage, true) // every attempt lands and loses its answer
		runs := 0
		fn := func(context.Context) (result, error) { runs++; return result{N: runs}, nil }
		v, replayed, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err, "a read shows the completion landed")
		assert.False(t, replayed)
		assert.Equal(t, 1, v.N)
		s.Fail("complete", nil, false)
		v, replayed, err = do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, 1, v.N)
		assert.Equal(t, 1, runs)
	})
	t.Run("ReleaseFails", func(t *testing.T) {
		s, g, c := newFaulty(t, idem.WithLease(time.Minute))
		k := key(t)
		s.Fail("release", outage, false)
		boom := errors.New("handler failed")
		runs := 0
		_, _, err := do(h, ctx, g, idem.Request{Key: k}, func(context.Context) (result, error) { runs++; return result{}, boom })
		require.ErrorIs(t, err, boom, "the caller sees the handler's error")
		s.Fail("release", nil, false)
		_, _, err = do(h, ctx, g, idem.Request{Key: k}, func(context.Context) (result, error) { runs++; return result{}, nil })
		require.ErrorIs(t, err, idem.ErrInProgress)
		c.Advance(time.Minute + idem.DefaultLeaseMargin + time.Second) // past the lease
		_, _, err = do(h, ctx, g, idem.Request{Key: k}, func(context.Context) (result, error) { runs++; return result{}, nil })
		require.NoError(t, err)
		assert.Equal(t, 2, runs)
	})
	if h.NewCounter == nil {
		return
	}
	t.Run("CompleteWithAttachedWritesFails", func(t *testing.T) {
		s, g, _ := newFaulty(t, idem.WithLease(time.Minute))
		add, read := h.NewCounter(t, s.Store)
		k := key(t)
		s.Fail("complete", outage, false)
		runs := 0
		fn := func(ctx context.Context) (result, error) { runs++; return result{N: runs}, add(ctx, 1, false) }
		_, _, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idemstore.ErrNotCommitted)
		require.ErrorIs(t, err, idem.ErrStore)
		require.ErrorIs(t, err, outage)
		assert.Equal(t, 0, read(), "nothing committed")
		s.Fail("complete", nil, false)
		v, replayed, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err, "the key was released: the retry runs at once")
		assert.False(t, replayed)
		assert.Equal(t, 2, v.N)
		assert.Equal(t, 2, runs)
		assert.Equal(t, 1, read())
	})
	t.Run("CompleteWithAttachedWritesAppliedResponseLost", func(t *testing.T) {
		s, g, _ := newFaulty(t)
		add, read := h.NewCounter(t, s.Store)
		k := key(t)
		s.Fail("complete", outage, true)
		runs := 0
		fn := func(ctx context.Context) (result, error) { runs++; return result{N: runs}, add(ctx, 1, false) }
		v, _, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.Equal(t, 1, v.N)
		assert.Greater(t, s.Calls("complete"), 1, "the completion was sent again")
		assert.Equal(t, 1, read(), "a resent completion never commits its attached writes twice")
		s.Fail("complete", nil, false)
		_, replayed, err := do(h, ctx, g, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, 1, runs)
		assert.Equal(t, 1, read())
	})
}
