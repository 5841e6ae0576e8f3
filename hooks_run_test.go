package idem_test

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
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestLeaseLostOncePerRun: a run whose lease the watchdog found run out, and whose
// completion then met the new owner's record, is one incident: OnLeaseLost runs once.
func TestLeaseLostOncePerRun(t *testing.T) {
	t.Parallel()
	const margin = 2 * time.Second
	clock := storetest.NewSimulatedClock()
	var lost atomic.Int32
	g, err := idem.New(memstore.New(), "test", idem.WithClock(clock), idem.WithLease(time.Minute),
		idem.WithLeaseMargin(margin), idem.WithHooks(idem.Hooks{OnLeaseLost: func(context.Context, idem.Event) { lost.Add(1) }}))
	require.NoError(t, err)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(hctx context.Context) (int, error) {
		awaitCancel(t, clock, hctx)
		clock.Advance(margin + time.Second) // the lease has ended: another caller takes the key over
		_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
		require.NoError(t, err)
		return 1, nil // ignoring its context: its completion meets the new owner's record
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost)
	assert.EqualValues(t, 1, lost.Load(), "OnLeaseLost runs once per run")
}

type runCtxKey struct{}

// TestOnRunContext: the context OnRun returns is the handler's, and the one the run's
// outcome hooks and OnRunEnd get; OnRunEnd runs once per run, after the outcome, with the
// caller's error and the handler's duration apart from the recording's.
func TestOnRunContext(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fn      func(ctx context.Context, clock *storetest.SettableClock) (int, error)
		outcome string
		wantErr error
	}{
		{name: "completed", outcome: "completed", fn: func(_ context.Context, clock *storetest.SettableClock) (int, error) {
			clock.Advance(3 * time.Second)
			return 1, nil
		}},
		{name: "released", outcome: "released", wantErr: boom, fn: func(_ context.Context, clock *storetest.SettableClock) (int, error) {
			clock.Advance(3 * time.Second)
			return 0, boom
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewSettableClock()
			var mu sync.Mutex
			var seen []string
			var end idem.Event
			outcome := func(name string) func(context.Context, idem.Event) {
				return func(ctx context.Context, e idem.Event) {
					mu.Lock()
					defer mu.Unlock()
					assert.Equal(t, "run-1", ctx.Value(runCtxKey{}), "%s gets the run's context", name)
					assert.Equal(t, 3*time.Second, e.HandlerDuration, "%s: the handler's duration", name)
					seen = append(seen, name)
				}
			}
			var claimedLease time.Time
			g, err := idem.New(memstore.New(), "test", idem.WithClock(clock), idem.WithHooks(idem.Hooks{
				OnClaimed: func(_ context.Context, e idem.Event) { claimedLease = e.LeaseExpires },
				OnRun: func(ctx context.Context, e idem.Event) context.Context {
					mu.Lock()
					defer mu.Unlock()
					assert.Equal(t, claimedLease, e.LeaseExpires)
					seen = append(seen, "run")
					return context.WithValue(ctx, runCtxKey{}, "run-1")
				},
				OnCompleted: outcome("completed"),
				OnReleased:  outcome("released"),
				OnRunEnd: func(ctx context.Context, e idem.Event) {
					mu.Lock()
					defer mu.Unlock()
					assert.Equal(t, "run-1", ctx.Value(runCtxKey{}))
					seen = append(seen, "end")
					end = e
				},
			}))
			require.NoError(t, err)
			_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				assert.Equal(t, "run-1", ctx.Value(runCtxKey{}), "the handler runs on OnRun's context")
				return tc.fn(ctx, clock)
			})
			assert.ErrorIs(t, err, tc.wantErr)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"run", tc.outcome, "end"}, seen)
			assert.False(t, claimedLease.IsZero(), "OnClaimed carries the lease end")
			assert.Equal(t, 3*time.Second, end.HandlerDuration)
			assert.ErrorIs(t, end.Err, tc.wantErr)
			if tc.wantErr == nil {
				assert.NoError(t, end.Err)
			}
		})
	}
}

// TestOnRunEndAfterPanic: a handler that panics still ends its run, with an error.
func TestOnRunEndAfterPanic(t *testing.T) {
	t.Parallel()
	var ends atomic.Int32
	var endErr error
	g, err := idem.New(memstore.New(), "test", idem.WithHooks(idem.Hooks{
		OnRunEnd: func(_ context.Context, e idem.Event) { ends.Add(1); endErr = e.Err },
	}))
	require.NoError(t, err)
	assert.Panics(t, func() {
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { panic("oops") })
	})
	assert.EqualValues(t, 1, ends.Load())
	assert.Error(t, endErr)
}

// TestReplayFromCache: OnReplayed says whether the replay came from the local cache or
// from the store.
func TestReplayFromCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []idem.Option
		cache bool
	}{
		{name: "store"},
		{name: "cache", opts: []idem.Option{idem.WithCache(10)}, cache: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var replays []bool
			opts := append(tc.opts, idem.WithHooks(idem.Hooks{OnReplayed: func(_ context.Context, e idem.Event) { replays = append(replays, e.FromCache) }}))
			g, err := idem.New(memstore.New(), "test", opts...)
			require.NoError(t, err)
			ok := func(context.Context) (int, error) { return 1, nil }
			_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, ok)
			require.NoError(t, err)
			_, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, ok)
			require.NoError(t, err)
			require.True(t, replayed)
			assert.Equal(t, []bool{tc.cache}, replays)
		})
	}
}

// TestJoinHooks: the joined hooks call each set field in order (OnRunEnd in reverse), and
// OnRun's contexts chain.
func TestJoinHooks(t *testing.T) {
	t.Parallel()
	var calls []string
	type k string
	mk := func(name string) idem.Hooks {
		return idem.Hooks{
			OnClaimed: func(context.Context, idem.Event) { calls = append(calls, name+".claimed") },
			OnCompleted: func(ctx context.Context, _ idem.Event) {
				calls = append(calls, name+".completed:"+ctxNames(ctx, k("a"), k("b")))
			},
			OnRun: func(ctx context.Context, _ idem.Event) context.Context {
				calls = append(calls, name+".run:"+ctxNames(ctx, k("a"), k("b")))
				return context.WithValue(ctx, k(name), name)
			},
			OnRunEnd: func(context.Context, idem.Event) { calls = append(calls, name+".end") },
			OnBatch:  func(context.Context, idem.BatchEvent) { calls = append(calls, name+".batch") },
		}
	}
	joined := idem.JoinHooks(mk("a"), idem.Hooks{}, mk("b"))
	g, err := idem.New(memstore.New(), "test", idem.WithHooks(joined))
	require.NoError(t, err)
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)
	joined.OnBatch(context.Background(), idem.BatchEvent{})
	assert.Equal(t, []string{
		"a.claimed", "b.claimed",
		"a.run:", "b.run:a",
		"a.completed:ab", "b.completed:ab",
		"b.end", "a.end",
		"a.batch", "b.batch",
	}, calls)

	empty := idem.JoinHooks(idem.Hooks{}, idem.Hooks{})
	assert.Nil(t, empty.OnClaimed, "no hook set: none joined")
	assert.Nil(t, empty.OnRun)
	assert.Nil(t, empty.OnBatch)
}

func ctxNames(ctx context.Context, keys ...any) string {
	s := ""
	for _, key := range keys {
		if v, ok := ctx.Value(key).(string); ok {
			s += v
		}
	}
	return s
}

// TestErrorType: ErrorType names the idem sentinel an error matches, through wrapping.
func TestErrorType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{err: nil, want: ""},
		{err: errors.New("x"), want: ""},
		{err: idem.ErrLeaseLost, want: "idem.ErrLeaseLost"},
		{err: &idem.InProgressError{}, want: "idem.ErrInProgress"},
		{err: &idem.StoreError{Op: "claim", Err: errors.New("down")}, want: "idem.ErrStore"},
		{err: errors.Join(errors.New("x"), idem.ErrDoNotStore), want: "idem.ErrDoNotStore"},
	} {
		assert.Equal(t, tc.want, idem.ErrorType(tc.err), "%v", tc.err)
	}
}

// TestReleasedSaysWhetherTheHandlerFailed: OnReleased tells a handler's failure from a
// completion that committed nothing.
func TestReleasedSaysWhetherTheHandlerFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fn   func(ctx context.Context) (int, error)
		want bool
	}{
		{name: "handler error", want: true, fn: func(context.Context) (int, error) { return 0, errors.New("boom") }},
		{name: "handler panic", want: true, fn: func(context.Context) (int, error) { panic("oops") }},
		{name: "attached write refused", want: false, fn: func(ctx context.Context) (int, error) {
			return 1, idem.Attach(ctx, func() error { return idem.ErrConditionFailed })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []bool
			g, err := idem.New(memstore.New(), "test", idem.WithHooks(idem.Hooks{
				OnReleased: func(_ context.Context, e idem.Event) { got = append(got, e.HandlerFailed) },
			}))
			require.NoError(t, err)
			func() {
				defer func() { _ = recover() }()
				_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "k"}, tc.fn)
			}()
			assert.Equal(t, []bool{tc.want}, got)
		})
	}
}

// TestOnRunInBatch: a batch request runs on OnRun's context too, and its run ends with
// OnRunEnd once Settle records its outcome, whose hooks get the run's context.
func TestOnRunInBatch(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	note := func(ctx context.Context, what string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, what+":"+fmt.Sprint(ctx.Value(runCtxKey{})))
	}
	g, err := idem.New(memstore.New(), "test", idem.WithHooks(idem.Hooks{
		OnRun: func(ctx context.Context, _ idem.Event) context.Context {
			note(ctx, "run")
			return context.WithValue(ctx, runCtxKey{}, "r")
		},
		OnCompleted: func(ctx context.Context, _ idem.Event) { note(ctx, "completed") },
		OnReleased:  func(ctx context.Context, _ idem.Event) { note(ctx, "released") },
		OnRunEnd:    func(ctx context.Context, _ idem.Event) { note(ctx, "end") },
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{{Key: "a"}, {Key: "b"}})
	_, _, err = idem.DoClaimed(ctx, b, 0, func(ctx context.Context) (int, error) {
		note(ctx, "handler")
		return 1, nil
	})
	require.NoError(t, err)
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { return 0, errors.New("boom") })
	require.Error(t, err)
	mu.Lock()
	assert.Equal(t, []string{"run:<nil>", "handler:r", "run:<nil>"}, seen, "the outcomes wait for Settle")
	mu.Unlock()
	for _, err := range b.Settle(ctx) {
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"run:<nil>", "handler:r", "run:<nil>", "completed:r", "end:r", "released:r", "end:r"}, seen)
}
