package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// batchAttached settles a batch whose handlers attach writes on an
// [idemstore.BatchAttachStore]: the outcomes wait for Settle (the context's deadline lies
// within every lease), nothing commits before it, and one write whose own condition fails
// fails its request alone, whose key is released; the others commit once and replay.
func (h Harness) batchAttached(t *testing.T) {
	f := h.fixture(t)
	add, read := h.NewCounter(t, f.store)
	ctx, cancel := context.WithDeadline(context.Background(), f.clock.Now().Add(30*time.Second))
	defer cancel()
	k := key(t)
	reqs := []idem.Request{{Key: k + "/a"}, {Key: k + "/b"}, {Key: k + "/c"}}
	b := f.guard.Claim(ctx, reqs)
	for i := range reqs {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (result, error) {
			return result{N: i}, add(ctx, 10, i == 1)
		})
		require.NoError(t, err, "request %d: its outcome waits for Settle", i)
	}
	assert.Equal(t, 0, read(), "nothing commits before Settle")
	errs := b.Settle(ctx)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], idem.ErrConditionFailed, "the failed write's request alone")
	require.NoError(t, errs[2])
	assert.Equal(t, 20, read(), "the others' writes, once each")
	for i, r := range reqs {
		v, replayed, err := idem.Do(ctx, f.guard, r, func(ctx context.Context) (result, error) {
			return result{N: 100}, add(ctx, 1, false)
		})
		require.NoError(t, err)
		if i == 1 {
			assert.False(t, replayed, "released: it runs again")
			continue
		}
		assert.True(t, replayed, "request %d", i)
		assert.Equal(t, i, v.N)
	}
	assert.Equal(t, 21, read())
}

func (h Harness) transactional(t *testing.T) {
	ctx := context.Background()
	t.Run("DuplicatesApplyOnce", func(t *testing.T) {
		f := h.fixture(t)
		add, read := h.NewCounter(t, f.store)
		k := key(t)
		for range 5 {
			_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
				return result{N: 10}, add(ctx, 10, false)
			})
			require.NoError(t, err)
		}
		assert.Equal(t, 10, read())
	})
	t.Run("CrashBeforeCompletion", func(t *testing.T) {
		f := h.fixture(t, idem.WithLease(time.Minute))
		add, read := h.NewCounter(t, f.store)
		k := key(t)
		release, done := make(chan struct{}), make(chan error, 1)
		started := make(chan struct{})
		go func() {
			_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
				if err := add(ctx, 5, false); err != nil {
					return result{}, err
				}
				close(started)
				<-release // the process "dies" here: its lease ends before it completes
				return result{N: 5}, nil
			})
			done <- err
		}()
		<-started
		assert.Equal(t, 0, read(), "nothing lands before completion")
		f.clock.Advance(2 * time.Minute)
		_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
			return result{N: 5}, add(ctx, 5, false)
		})
		require.NoError(t, err)
		close(release) // the fenced late owner tries to complete
		require.ErrorIs(t, <-done, idem.ErrLeaseLost)
		assert.Equal(t, 5, read(), "the fenced owner's write never lands")
	})
	t.Run("FailedConditionReleases", func(t *testing.T) {
		f := h.fixture(t)
		add, read := h.NewCounter(t, f.store)
		k := key(t)
		_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
			return result{N: 1}, add(ctx, 1, true)
		})
		require.ErrorIs(t, err, idem.ErrConditionFailed)
		assert.Equal(t, 0, read())
		_, replayed, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
			return result{N: 1}, add(ctx, 1, false)
		})
		require.NoError(t, err)
		assert.False(t, replayed, "the key was released")
		assert.Equal(t, 1, read())
	})
}
