package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func (h Harness) newThenReplay(t *testing.T) {
	f := h.fixture(t)
	k := key(t)
	runs := 0
	fn := func(context.Context) (result, error) { runs++; return result{N: runs, Msg: "first"}, nil }
	ctx := context.Background()

	v, replayed, err := do(h, ctx, f.guard, idem.Request{Key: k}, fn)
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, result{N: 1, Msg: "first"}, v)

	for range 3 {
		v, replayed, err = do(h, ctx, f.guard, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, result{N: 1, Msg: "first"}, v)
	}
	assert.Equal(t, 1, runs)
}

func (h Harness) payloadMismatch(t *testing.T) {
	f := h.fixture(t)
	k := key(t)
	runs := 0
	fn := func(context.Context) (result, error) { runs++; return result{N: 1}, nil }
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k, Fingerprint: []byte(`{"a":1}`)}, fn)
	require.NoError(t, err)
	_, _, err = do(h, context.Background(), f.guard, idem.Request{Key: k, Fingerprint: []byte(`{"a":2}`)}, fn)
	require.ErrorIs(t, err, idem.ErrPayloadMismatch)
	_, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k, Fingerprint: []byte(`{"a":1}`)}, fn)
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, 1, runs)
}

// blockOwner starts an owner of k that runs work (if not nil), then blocks until release is
// closed and returns v with work's error; it returns once the owner holds the lease and
// work has run. Past its lease, such an owner has "died". It returns the owner's outcome
// channel.
func blockOwner(h Harness, t *testing.T, ctx context.Context, g *idem.Guard, k string, v result, work func(context.Context) error) (release chan struct{}, done chan error) {
	t.Helper()
	started := make(chan struct{})
	release, done = make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := do(h, ctx, g, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
			var err error
			if work != nil {
				err = work(ctx)
			}
			close(started)
			<-release
			return v, err
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("owner did not start: %v", err)
	}
	return release, done
}

func (h Harness) inProgress(t *testing.T) {
	f := h.fixture(t, idem.WithLease(90*time.Second))
	k := key(t)
	release, done := blockOwner(h, t, context.Background(), f.guard, k, result{N: 7}, nil)

	f.clock.Advance(30 * time.Second)
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		t.Error("duplicate ran")
		return result{}, nil
	})
	require.ErrorIs(t, err, idem.ErrInProgress)
	var ip *idem.InProgressError
	require.ErrorAs(t, err, &ip)
	assert.Equal(t, 60*time.Second+idem.DefaultLeaseMargin, ip.RetryAfter, "a lease without a deadline is WithLease plus the margin")

	close(release)
	require.NoError(t, <-done)
}

func (h Harness) waitForInFlight(t *testing.T) {
	f := h.fixture(t, idem.WithWait(time.Minute, 5*time.Millisecond))
	k := key(t)
	release, done := blockOwner(h, t, context.Background(), f.guard, k, result{N: 42}, nil)
	type out struct {
		v        result
		replayed bool
		err      error
	}
	waiter := make(chan out, 1)
	go func() {
		v, r, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
			return result{N: -1}, nil
		})
		waiter <- out{v, r, err}
	}()
	close(release)
	require.NoError(t, <-done)
	w := <-waiter
	require.NoError(t, w.err)
	assert.True(t, w.replayed)
	assert.Equal(t, 42, w.v.N)
}

func (h Harness) expiredIsAbsent(t *testing.T) {
	f := h.fixture(t, idem.WithExpiry(time.Hour))
	k := key(t)
	runs := 0
	fn := func(context.Context) (result, error) { runs++; return result{N: runs}, nil }
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fn)
	require.NoError(t, err)
	f.clock.Advance(time.Hour + time.Second)
	// The record still exists (TTL deletion lags) but no longer counts.
	v, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fn)
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 2, v.N)
}

func (h Harness) contention(t *testing.T) {
	goroutines, keys := h.Goroutines, h.Keys
	if goroutines == 0 {
		goroutines = 64
	}
	if keys == 0 {
		keys = 50
	}
	f := h.fixture(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4) // keys in flight at once
	for i := range keys {
		k := fmt.Sprintf("%s-%d", key(t), i)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var runs atomic.Int32
			var inner sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, goroutines)
			vals := make([]result, goroutines)
			for j := range goroutines {
				inner.Add(1)
				go func() {
					defer inner.Done()
					<-start
					vals[j], _, errs[j] = do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
						n := runs.Add(1)
						return result{N: int(n), Msg: k}, nil
					})
				}()
			}
			close(start)
			inner.Wait()
			assert.Equal(t, int32(1), runs.Load(), "key %s", k)
			for j := range goroutines {
				if errs[j] != nil {
					assert.ErrorIs(t, errs[j], idem.ErrInProgress)
					continue
				}
				assert.Equal(t, result{N: 1, Msg: k}, vals[j])
			}
		}()
	}
	wg.Wait()
}

func (h Harness) waitOtherPayload(t *testing.T) {
	f := h.fixture(t, idem.WithWait(time.Minute, 2*time.Millisecond))
	k := key(t)
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	ownerDone := make(chan error, 1)
	go func() {
		_, _, err := do(h, ctx, f.guard, idem.Request{Key: k, Fingerprint: []byte("X")}, func(context.Context) (result, error) {
			close(started)
			<-release
			return result{}, errors.New("owner fails: key released")
		})
		ownerDone <- err
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, _, err := do(h, ctx, f.guard, idem.Request{Key: k, Fingerprint: []byte("X")}, func(context.Context) (result, error) {
			return result{Msg: "X"}, nil
		})
		waiter <- err
	}()
	close(release)
	require.Error(t, <-ownerDone)
	// Whoever wins the released key, the waiter never replays another payload's result:
	// it either runs X itself, or (if Y completed first) gets a mismatch.
	_, _, errY := do(h, ctx, f.guard, idem.Request{Key: k, Fingerprint: []byte("Y")}, func(context.Context) (result, error) {
		return result{Msg: "Y"}, nil
	})
	errX := <-waiter
	if errX == nil {
		require.ErrorIs(t, errY, idem.ErrPayloadMismatch)
	} else {
		require.ErrorIs(t, errX, idem.ErrPayloadMismatch)
		require.NoError(t, errY)
	}
}

func (h Harness) shortExpiryLongLease(t *testing.T) {
	f := h.fixture(t, idem.WithExpiry(30*time.Second), idem.WithLease(5*time.Minute))
	k := key(t)
	release, done := blockOwner(h, t, context.Background(), f.guard, k, result{N: 1}, nil)
	f.clock.Advance(time.Minute) // past the expiry window, well inside the lease
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		t.Error("a second run inside the first one's lease")
		return result{}, nil
	})
	require.ErrorIs(t, err, idem.ErrInProgress)
	close(release)
	require.NoError(t, <-done)
}
