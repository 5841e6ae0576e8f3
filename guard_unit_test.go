package idem_test

import (
	"context"
	"errors"
	"fmt"
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

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	for _, cached := range []bool{false, true} {
		s := newCounting(memstore.New())
		opts := []idem.Option{idem.WithScope("rt")}
		if cached {
			opts = append(opts, idem.WithCache(8))
		}
		g, err := idem.New(s, "test", opts...)
		require.NoError(t, err)
		ctx := context.Background()
		fn := func(context.Context) (int, error) { return 1, nil }

		_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
		require.NoError(t, err)
		assert.Equal(t, 2, s.total(), "new key: claim + complete")

		s.reset()
		_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
		require.NoError(t, err)
		assert.True(t, replayed)
		if cached {
			assert.Equal(t, 0, s.total(), "warm cache replay")
		} else {
			assert.Equal(t, 1, s.total(), "replay: the claim's conflict carries the record")
		}
	}

	s := newCounting(memstore.New())
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "busy"}, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
	}()
	<-started
	s.reset()
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "busy"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
	assert.Equal(t, 1, s.total(), "in-flight duplicate")
	close(release)
	<-done
}

func TestKeys(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("orders"))
	require.NoError(t, err)
	cases := []struct {
		name string
		req  idem.Request
		want error
	}{
		{"Empty", idem.Request{}, idem.ErrMissingKey},
		{"TooLong", idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength+1)}, idem.ErrInvalidKey},
		{"Longest", idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength)}, nil},
		{"Binary", idem.Request{Key: "a\x00b\xff"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sk, err := g.StoredKey(tc.req)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(sk, "orders.test#"))
			assert.Len(t, sk, len("orders.test#")+64)
			assert.NotContains(t, sk, tc.req.Key, "raw keys never reach the store")
		})
	}

	a, _ := g.StoredKey(idem.Request{Key: "k", Tenant: "alice"})
	b, _ := g.StoredKey(idem.Request{Key: "k", Tenant: "bob"})
	c, _ := g.StoredKey(idem.Request{Key: "k"})
	d, _ := g.StoredKey(idem.Request{Key: "ek", Tenant: "alic"})
	assert.NotEqual(t, a, b, "tenants never share a record")
	assert.NotEqual(t, a, c)
	assert.NotEqual(t, a, d, "tenant and key cannot be shifted into each other")
}

func TestOptionsRejectBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opt  idem.Option
	}{
		{"WithExpiry", idem.WithExpiry(0)},
		{"WithLease", idem.WithLease(-time.Second)},
		{"WithLeaseMargin", idem.WithLeaseMargin(-time.Second)},
		{"WithMaxLease", idem.WithMaxLease(0)},
		{"WithScope", idem.WithScope("")},
		{"WithCache", idem.WithCache(-1)},
		{"WithWait", idem.WithWait(time.Second, 2*time.Second)},
		{"WithRememberFailures", idem.WithRememberFailures(nil)},
		{"WithHeartbeat", idem.WithHeartbeat(-1)},
		{"WithCodec", idem.WithCodec(nil)},
		{"WithCompression", idem.WithCompression(-1)},
		{"WithMaxResultSize", idem.WithMaxResultSize(0)},
		{"WithClock", idem.WithClock(nil)},
		{"WithLogger", idem.WithLogger(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := idem.New(memstore.New(), "test", tc.opt)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.name, "the error names the option")
		})
	}
	_, err := idem.New(nil, "test")
	require.ErrorIs(t, err, idem.ErrInvalidOption)
}

func TestScopeReadsNoEnvironment(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "payments-fn")
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	assert.Equal(t, idem.DefaultScope+".test", g.Scope(), "the library reads no environment")
	g, err = idem.New(memstore.New(), "test", idem.WithScope("payments-fn"))
	require.NoError(t, err)
	assert.Equal(t, "payments-fn.test", g.Scope())
}

func TestLeaseFollowsDeadline(t *testing.T) {
	t.Parallel()
	base := time.Now() // deadlines are real: the context ends on the real clock
	clock := func() time.Time { return base }
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(clock)), idem.WithLeaseMargin(time.Second), idem.WithMaxLease(time.Minute))
	require.NoError(t, err)
	cases := []struct {
		name     string
		deadline time.Duration // 0: none
		want     time.Duration
	}{
		{"NoDeadline", 0, idem.DefaultLease + time.Second}, // WithLease plus the margin, as a deadline gets
		{"Deadline", 10 * time.Second, 11 * time.Second},
		{"CappedByMaxThenMargin", time.Hour, time.Minute + time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, base.Add(tc.deadline))
				defer cancel()
			}
			var lease time.Time
			_, _, err := idem.Do(ctx, g, idem.Request{Key: tc.name}, func(ctx context.Context) (int, error) {
				sk, _ := g.StoredKey(idem.Request{Key: tc.name})
				rec, err := s.Get(ctx, sk)
				require.NoError(t, err)
				lease = rec.LeaseExpires
				return 0, nil
			})
			require.NoError(t, err)
			assert.Equal(t, tc.want, lease.Sub(base))
		})
	}
}

func TestPanicReleasesKey(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	assert.Panics(t, func() {
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (int, error) { panic("bug") })
	})
	v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (int, error) { return 3, nil })
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 3, v)
}

func TestWaitGivesUpAtBudget(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithWait(30*time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	holdKey(t, g, "w")
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "w"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, idem.ErrInProgress)
}

func TestWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	owner, err := idem.New(s, "test")
	require.NoError(t, err)
	waiter, err := idem.New(s, "test", idem.WithWait(time.Minute, time.Millisecond))
	require.NoError(t, err)
	holdKey(t, owner, "w")
	// The caller gives up while waiting (a deadline ends the wait earlier, by its margin: see
	// TestWaitEndsBeforeTheDeadline).
	gaveUp := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	time.AfterFunc(20*time.Millisecond, func() { cancel(gaveUp) })
	_, _, err = idem.Do(ctx, waiter, idem.Request{Key: "w"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, gaveUp)
}

func TestHeartbeatExtendsLease(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock()
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLease(time.Minute), idem.WithHeartbeat(2*time.Millisecond))
	require.NoError(t, err)
	sk, _ := g.StoredKey(idem.Request{Key: "hb"})
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "hb"}, func(ctx context.Context) (int, error) {
		clock.Advance(50 * time.Second)
		require.Eventually(t, func() bool {
			rec, _ := s.Get(ctx, sk)
			return rec.LeaseExpires.Equal(clock.Now().Add(time.Minute + idem.DefaultLeaseMargin))
		}, 5*time.Second, time.Millisecond)
		return 1, nil
	})
	require.NoError(t, err)
}

func TestHeartbeatCancelsOnLostLease(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithHeartbeat(time.Millisecond))
	require.NoError(t, err)
	sk, _ := g.StoredKey(idem.Request{Key: "hb"})
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "hb"}, func(ctx context.Context) (int, error) {
		rec, _ := s.Get(ctx, sk)
		rec.LeaseToken = "someone-else" // another owner took over
		s.Put(*rec)
		<-ctx.Done()
		return 0, context.Cause(ctx)
	})
	require.ErrorIs(t, err, idem.ErrLeaseLost)
}

func TestHooks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	rec := func(name string) func(context.Context, idem.Event) {
		return func(_ context.Context, e idem.Event) {
			mu.Lock()
			defer mu.Unlock()
			assert.True(t, strings.HasPrefix(e.Key, "hooks.test#"), "hooks see stored keys only")
			seen[name]++
		}
	}
	faulty := storetest.NewFaulty(memstore.New())
	g, err := idem.New(faulty, "test", idem.WithScope("hooks"), idem.WithHooks(idem.Hooks{
		OnClaimed: rec("claimed"), OnCompleted: rec("completed"), OnReplayed: rec("replayed"),
		OnMismatch: rec("mismatch"), OnReleased: rec("released"), OnStoreError: rec("store"),
		OnInProgress: rec("inprogress"), OnLeaseLost: rec("leaselost"),
	}))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) (int, error) { return 1, nil }
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "a", Fingerprint: []byte("1")}, ok)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "a", Fingerprint: []byte("1")}, ok)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "a", Fingerprint: []byte("2")}, ok)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "b"}, func(context.Context) (int, error) { return 0, errors.New("x") })
	faulty.Fail("claim", errors.New("down"), false)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "c"}, ok)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"claimed": 2, "completed": 1, "replayed": 1, "mismatch": 1, "released": 1, "store": 1}, seen)
}

func TestFailOpenRunIsReportedUnguarded(t *testing.T) {
	t.Parallel()
	faulty := storetest.NewFaulty(memstore.New())
	var unguarded []idem.Event
	g, err := idem.New(faulty, "test", idem.WithFailOpen(true), idem.WithHooks(idem.Hooks{
		OnUnguarded: func(_ context.Context, e idem.Event) { unguarded = append(unguarded, e) },
	}))
	require.NoError(t, err)
	faulty.Fail("claim", errors.New("down"), false)
	runs := 0
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		runs++
		return 1, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, runs)
	require.Len(t, unguarded, 1, "the fail-open run is reported")
	assert.Equal(t, "claim", unguarded[0].Op)
	require.ErrorIs(t, unguarded[0].Err, idem.ErrStore)
	assert.NotNil(t, g.Hooks().OnUnguarded, "wrappers fire it through Guard.Hooks")
}

func TestAttachOutsideHandler(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, idem.Attach(context.Background(), func() error { return nil }), idem.ErrNoLease)
	assert.Empty(t, idem.LastCheckpoint(context.Background()))
}

func TestDoNotStoreBeatsRememberFailures(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithRememberFailures(func(error) bool { return true }))
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) (int, error) {
		runs++
		return 503, fmt.Errorf("upstream down: %w", idem.ErrDoNotStore)
	}
	for range 2 {
		v, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, fn)
		require.ErrorIs(t, err, idem.ErrDoNotStore)
		assert.Equal(t, 503, v, "the handler's result comes back as is")
	}
	assert.Equal(t, 2, runs, "released, never remembered")
}

func TestInProgressWithoutLeaseEndHoldsKey(t *testing.T) {
	t.Parallel()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.New()
	g, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(func() time.Time { return now })))
	require.NoError(t, err)
	sk, _ := g.StoredKey(idem.Request{Key: "k"})
	s.Put(idemstore.Record{Key: sk, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour), LeaseToken: "x"})
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 1, nil })
	require.ErrorIs(t, err, idem.ErrInProgress, "as the DynamoDB claim condition does")
}

func TestFailOpenNeverOnCancelledContext(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithFailOpen(true))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		t.Error("ran unguarded for a caller that gave up")
		return 0, nil
	})
	require.ErrorIs(t, err, context.Canceled)
}

func TestAttachAfterHandlerReturned(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	var leaked context.Context
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		leaked = ctx
		return 1, nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, idem.Attach(leaked, func() error { return nil }), idem.ErrNoLease,
		"a write attached too late would silently never commit")
}

// TestHeartbeatMustFitTheLease checks the interval against the lease a claim is granted
// without a deadline, WithLease capped by WithMaxLease, in whatever order the options come:
// a beat at most every half of that lease less the margin (the point where the handler's
// context is cancelled if no extension succeeded), so that one missed beat does not lose it.
func TestHeartbeatMustFitTheLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []idem.Option
		ok   bool
	}{
		{"half of WithLease less the margin", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(29 * time.Second)}, true},
		{"half of WithLease", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(30 * time.Second)}, false},
		{"half of WithLease, another margin", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(30 * time.Second), idem.WithLeaseMargin(0)}, true},
		{"above half of WithLease", []idem.Option{idem.WithLease(time.Minute), idem.WithHeartbeat(40 * time.Second)}, false},
		{"half of WithLease, above half of the default max lease", []idem.Option{idem.WithLease(40 * time.Minute), idem.WithHeartbeat(20 * time.Minute)}, false},
		{"half of the default max lease less the margin", []idem.Option{idem.WithLease(40 * time.Minute), idem.WithHeartbeat(7*time.Minute + 29*time.Second)}, true},
		{"above half of WithMaxLease", []idem.Option{idem.WithHeartbeat(20 * time.Second), idem.WithMaxLease(30 * time.Second)}, false},
		{"half of WithMaxLease less the margin", []idem.Option{idem.WithHeartbeat(14 * time.Second), idem.WithMaxLease(30 * time.Second)}, true},
		{"a lease no longer than the margin", []idem.Option{idem.WithHeartbeat(time.Millisecond), idem.WithLease(2 * time.Second)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := idem.New(memstore.New(), "test", tc.opts...)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "WithHeartbeat")
		})
	}
}

// The handler's context is the caller's: values, deadline and cancellation pass through the
// lease it carries.
func TestHandlerContextIsTheCallers(t *testing.T) {
	type ctxKey struct{}
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), time.Minute)
	defer cancel()
	deadline, _ := parent.Deadline()
	_, _, err = idem.Do(parent, g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		require.Equal(t, "v", ctx.Value(ctxKey{}))
		d, ok := ctx.Deadline()
		require.True(t, ok)
		require.Equal(t, deadline, d)
		require.NoError(t, ctx.Err())
		child, stop := context.WithCancel(ctx)
		defer stop()
		cancel()
		<-child.Done()
		require.ErrorIs(t, context.Cause(child), context.Canceled)
		return "", errors.New("cancelled")
	})
	require.EqualError(t, err, "cancelled")
}

// Do returns the handler's result with its error, and a nil interface result as nil.
func TestDoReturnsResultWithError(t *testing.T) {
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	boom := errors.New("boom")
	v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "a"}, func(context.Context) (int, error) { return 7, boom })
	require.ErrorIs(t, err, boom)
	require.False(t, replayed)
	require.Equal(t, 7, v)

	var nilErr error
	e, _, err := idem.Do(context.Background(), g, idem.Request{Key: "b"}, func(context.Context) (error, error) { return nilErr, nil })
	require.NoError(t, err)
	require.Nil(t, e)
}
