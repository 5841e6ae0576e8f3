package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Harness tells [Run] how to make the store under test. Only NewStore is required.
type Harness struct {
	// NewStore returns an empty store (or one whose keys no other test uses).
	NewStore func(t *testing.T) idemstore.Store
	// NewCounter returns a fresh business counter for store: add attaches "add n" to the
	// completion of the guarded call that ctx belongs to (with failCond, a write whose
	// condition fails), and read returns the committed total. Nil for a store that
	// supports no attached writes: the suite then skips only the attached-write tests.
	NewCounter func(t *testing.T, store idemstore.Store) (add func(ctx context.Context, n int, failCond bool) error, read func() int)
	// Contention sets the goroutines per key and keys of the race test (defaults 64 and 50).
	Goroutines, Keys int
	// Batch routes every call through an [idem.Batch] (Claim, DoClaimed, Settle) instead
	// of [idem.Do], to show the batch path keeps Do's semantics. The batch claims the
	// request's key with a second one that it never runs and releases at Settle.
	Batch bool
}

// do runs one request the way the harness says.
func do[T any](h Harness, ctx context.Context, g *idem.Guard, req idem.Request, fn func(context.Context) (T, error)) (T, bool, error) {
	if !h.Batch {
		return idem.Do(ctx, g, req, fn)
	}
	// A second key, never run: a batch with one key to claim is claimed as Do claims it
	// (idem.Guard.Claim), and the suite means the batch claim. Settle releases it.
	pad := req
	pad.Key += "/pad"
	b := g.Claim(ctx, []idem.Request{req, pad})
	v, replayed, err := idem.DoClaimed(ctx, b, 0, fn)
	if serr := b.Settle(ctx)[0]; err == nil && serr != nil {
		return v, false, serr
	}
	return v, replayed, err
}

type result struct {
	N   int    `json:"n"`
	Msg string `json:"msg"`
}

type fixture struct {
	store idemstore.Store
	clock *Clock
	guard *idem.Guard
}

func (h Harness) fixture(t *testing.T, opts ...idem.Option) fixture {
	t.Helper()
	s := h.NewStore(t)
	c := NewClock()
	opts = append([]idem.Option{idem.WithClock(c), idem.WithScope("suite")}, opts...)
	g, err := idem.New(s, "test", opts...)
	require.NoError(t, err)
	return fixture{store: s, clock: c, guard: g}
}

func key(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return t.Name() + "/" + hex.EncodeToString(b[:])
}

// Run runs the behaviour suite against the store h makes, as subtests of t. A failure
// names the guarantee the store broke.
func Run(t *testing.T, h Harness) {
	t.Run("NewThenReplay", h.newThenReplay)
	t.Run("ErrorReleases", h.errorReleases)
	t.Run("RememberedFailure", h.rememberedFailure)
	t.Run("PayloadMismatch", h.payloadMismatch)
	t.Run("InProgress", h.inProgress)
	t.Run("WaitForInFlight", h.waitForInFlight)
	t.Run("ExpiredRecordIsAbsent", h.expiredIsAbsent)
	t.Run("TakeoverFencesLateOwner", h.takeover)
	t.Run("Checkpoint", h.checkpoint)
	t.Run("CheckpointSurvivesTwoTakeovers", h.checkpointTwoTakeovers)
	t.Run("CheckpointSurvivesResentTakeover", h.checkpointResentTakeover)
	t.Run("CheckpointSurvivesHandlerFailure", h.checkpointSurvivesFailure)
	t.Run("WaitJudgesAnotherOwnersRecord", h.waitOtherPayload)
	t.Run("ShortExpiryLongLease", h.shortExpiryLongLease)
	t.Run("Contention", h.contention)
	t.Run("LargeResults", h.largeResults)
	t.Run("IncompatibleRecord", h.incompatible)
	t.Run("StoreFailures", h.storeFailures)
	t.Run("LateExtension", h.lateExtension)
	t.Run("LateCheckpoint", h.lateCheckpoint)
	t.Run("CheckpointSeqCarried", h.checkpointSeqCarried)
	t.Run("CheckpointKeptExactly", h.checkpointKeptExactly)
	t.Run("LateClaimAfterRelease", h.lateClaimAfterRelease)
	t.Run("LateClaimAfterTwoReleases", h.lateClaimAfterTwoReleases)
	t.Run("LateClaimThroughGuard", h.lateClaimThroughGuard)
	t.Run("BatchDuplicates", h.batchDuplicates)
	t.Run("TakeoverCarriesExactly", h.takeoverCarriesExactly)
	if h.NewCounter != nil {
		t.Run("TransactionalCompletion", h.transactional)
		if _, ok := h.NewStore(t).(idemstore.BatchAttachStore); ok {
			t.Run("BatchAttachedCompletion", h.batchAttached)
		}
	}
}

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

func (h Harness) errorReleases(t *testing.T) {
	f := h.fixture(t)
	k := key(t)
	boom := errors.New("boom")
	runs := 0
	fail := func(context.Context) (result, error) { runs++; return result{}, boom }
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fail)
	require.ErrorIs(t, err, boom)

	v, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		runs++
		return result{N: 2}, nil
	})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 2, v.N)
	assert.Equal(t, 2, runs)
}

func (h Harness) rememberedFailure(t *testing.T) {
	permanent := errors.New("card declined")
	f := h.fixture(t, idem.WithRememberFailures(func(err error) bool { return errors.Is(err, permanent) }))
	k := key(t)
	runs := 0
	fn := func(context.Context) (result, error) { runs++; return result{}, permanent }
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fn)
	require.ErrorIs(t, err, permanent)

	_, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fn)
	require.ErrorIs(t, err, idem.ErrFailed)
	var fe *idem.FailedError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "card declined", fe.Message)
	assert.False(t, replayed)
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

func (h Harness) takeover(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	k := key(t)
	release, done := blockOwner(h, t, context.Background(), f.guard, k, result{N: 1, Msg: "late"}, nil)

	f.clock.Advance(time.Minute + idem.DefaultLeaseMargin + time.Second) // the first owner's lease has ended
	v, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		return result{N: 2, Msg: "new owner"}, nil
	})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, "new owner", v.Msg)

	close(release)
	require.ErrorIs(t, <-done, idem.ErrLeaseLost)

	v, replayed, err = do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		t.Error("ran after completion")
		return result{}, nil
	})
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "new owner", v.Msg, "the late owner must not overwrite the new owner's record")
}

func (h Harness) checkpoint(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	k := key(t)
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
			assert.Empty(t, idem.LastCheckpoint(ctx))
			if err := idem.Checkpoint(ctx, "payment_charged"); err != nil {
				return result{}, err
			}
			assert.Equal(t, "payment_charged", idem.LastCheckpoint(ctx))
			close(started)
			<-release // "crashes": never completes within its lease
			return result{}, nil
		})
		done <- err
	}()
	<-started
	f.clock.Advance(2 * time.Minute)
	v, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		return result{Msg: idem.LastCheckpoint(ctx)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "payment_charged", v.Msg)

	close(release)
	require.ErrorIs(t, <-done, idem.ErrLeaseLost)
	assert.ErrorIs(t, idem.Checkpoint(context.Background(), "x"), idem.ErrNoLease)
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

func (h Harness) largeResults(t *testing.T) {
	f := h.fixture(t, idem.WithMaxResultSize(100*1024))
	ctx := context.Background()

	t.Run("Compressed", func(t *testing.T) {
		k := key(t)
		big := result{Msg: strings.Repeat(`{"sku":"A-100","quantity":3},`, 2000)} // ~58 KB of JSON
		_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(context.Context) (result, error) { return big, nil })
		require.NoError(t, err)
		rec := storedRecord(t, f, k)
		assert.Equal(t, "json+gzip", rec.Encoding)
		assert.Less(t, len(rec.Data), len(big.Msg)/4)
		v, replayed, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(context.Context) (result, error) { return result{}, nil })
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, big, v)
	})
	t.Run("TooLarge", func(t *testing.T) {
		k := key(t)
		runs := 0
		huge := result{Msg: randomText(300 * 1024)} // incompressible, over the limit
		fn := func(context.Context) (result, error) { runs++; return huge, nil }
		v, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.Equal(t, huge, v, "the first caller still gets its result")
		rec := storedRecord(t, f, k)
		assert.Equal(t, idemstore.StatusCompleted, rec.Status)
		assert.Equal(t, idemstore.EncodingNone, rec.Encoding)
		_, _, err = do(h, ctx, f.guard, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idem.ErrResultNotStored)
		assert.Equal(t, 1, runs)
	})
}

func (h Harness) incompatible(t *testing.T) {
	cases := []struct {
		name     string
		data     string
		encoding string
		version  int
	}{
		{"UndecodableData", "{not json", "json", idemstore.SchemaVersion},
		{"UnknownEncoding", `{"n":1}`, "msgpack", idemstore.SchemaVersion},
		{"BadGzip", "not gzip", "json+gzip", idemstore.SchemaVersion},
		{"FutureSchema", `{"n":1}`, "json", idemstore.SchemaVersion + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := h.fixture(t)
			k := key(t)
			// Write the record through the store's own operations, as another writer would.
			runs := 0
			_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
				runs++
				return result{}, errors.New("release me")
			})
			require.Error(t, err)
			sk := storedKey(t, f.guard, k)
			now := f.clock.Now()
			rec := &idemstore.Record{Key: sk, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
				LeaseExpires: now.Add(time.Minute), LeaseToken: "tok", Version: idemstore.SchemaVersion}
			_, claimed, err := f.store.Claim(context.Background(), rec, now)
			require.NoError(t, err)
			require.True(t, claimed)
			done := *rec
			done.Status, done.Data, done.Encoding, done.Version = idemstore.StatusCompleted, []byte(tc.data), tc.encoding, tc.version
			require.NoError(t, f.store.Complete(context.Background(), &done, nil))

			_, _, err = do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
				runs++
				return result{}, nil
			})
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
			assert.Equal(t, 1, runs, "an incompatible record is an error, never a re-run")
		})
	}
}

func (h Harness) storeFailures(t *testing.T) {
	outage := errors.New("injected outage")
	ctx := context.Background()
	newFaulty := func(t *testing.T, opts ...idem.Option) (*Faulty, *idem.Guard, *Clock) {
		s := NewFaulty(h.NewStore(t))
		c := NewClock()
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

func storedRecord(t *testing.T, f fixture, k string) *idemstore.Record {
	t.Helper()
	rec, err := f.store.Get(context.Background(), storedKey(t, f.guard, k))
	require.NoError(t, err)
	require.NotNil(t, rec)
	return rec
}

// randomText returns n bytes of printable, incompressible text.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	x := uint64(88172645463325252)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%uint64(len(alphabet))]
	}
	return string(b)
}

func storedKey(t *testing.T, g *idem.Guard, k string) string {
	t.Helper()
	sk, err := g.StoredKey(idem.Request{Key: k})
	require.NoError(t, err)
	return sk
}

func (h Harness) checkpointTwoTakeovers(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	h.checkpointTakeovers(t, f.guard, f.clock)
}

// checkpointTakeovers has an owner of a new key record a checkpoint and die, a second owner
// take over and die, and a third take over; the second and third must see the checkpoint.
func (h Harness) checkpointTakeovers(t *testing.T, g *idem.Guard, clock *Clock) {
	k := key(t)
	r1, d1 := blockOwner(h, t, context.Background(), g, k, result{}, func(ctx context.Context) error { return idem.Checkpoint(ctx, "payment_charged") })
	clock.Advance(2 * time.Minute)
	seen := ""
	r2, d2 := blockOwner(h, t, context.Background(), g, k, result{}, func(ctx context.Context) error { seen = idem.LastCheckpoint(ctx); return nil })
	assert.Equal(t, "payment_charged", seen, "the second owner knows the card was charged")
	clock.Advance(2 * time.Minute)
	v, _, err := do(h, context.Background(), g, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		return result{Msg: idem.LastCheckpoint(ctx)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "payment_charged", v.Msg, "the third owner still knows the card was charged")
	close(r1)
	close(r2)
	require.ErrorIs(t, <-d1, idem.ErrLeaseLost)
	require.ErrorIs(t, <-d2, idem.ErrLeaseLost)
}

// checkpointResentTakeover takes over checkpointed keys with claims whose answers are lost
// and which are sent again (the SDK's retry after a broken connection): the resend meets
// the record its first attempt wrote, and the checkpoint must be in it.
func (h Harness) checkpointResentTakeover(t *testing.T) {
	s := NewFaulty(h.NewStore(t))
	c := NewClock()
	g, err := idem.New(s, "test", idem.WithClock(c), idem.WithScope("suite"), idem.WithLease(time.Minute))
	require.NoError(t, err)
	s.ResendClaims(true)
	h.checkpointTakeovers(t, g, c)
}

// checkpointSurvivesFailure records a checkpoint and then fails, with an error or a panic:
// the key is released for a retry, and the retry resumes from the checkpoint.
func (h Harness) checkpointSurvivesFailure(t *testing.T) {
	boom := errors.New("charged, then failed")
	for _, panics := range []bool{false, true} {
		name := map[bool]string{false: "Error", true: "Panic"}[panics]
		t.Run(name, func(t *testing.T) {
			f := h.fixture(t)
			k := key(t)
			ctx := context.Background()
			recovered := func() (r any) {
				defer func() { r = recover() }()
				_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
					if err := idem.Checkpoint(ctx, "charged"); err != nil {
						return result{}, err
					}
					if panics {
						panic(boom)
					}
					return result{}, boom
				})
				require.ErrorIs(t, err, boom)
				return nil
			}()
			if panics {
				assert.Equal(t, boom, recovered, "the panic goes on")
			}
			v, replayed, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
				return result{Msg: idem.LastCheckpoint(ctx)}, nil
			})
			require.NoError(t, err, "the key was released")
			assert.False(t, replayed)
			assert.Equal(t, "charged", v.Msg, "the retry resumes from the checkpoint")
		})
	}
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
