package idem_test

import (
	"context"
	"errors"
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

// TestAttachRefusesWhatTheStoreCannotCommit: a value the guard's store cannot commit (the
// in-memory store takes func() error) is refused by Attach itself, at once, with an error
// naming its type; it is not attached, so a handler that goes on completes without it, and
// one that returns the error releases the key: the next request runs at once instead of
// finding the key in progress until the lease ends.
func TestAttachRefusesWhatTheStoreCannotCommit(t *testing.T) {
	t.Parallel()
	type orderRow struct{ ID string }
	for _, tc := range []struct {
		name          string
		returnAttach  bool // the handler returns Attach's error
		wantCompleted bool
	}{
		{"HandlerReturnsTheError", true, false},
		{"HandlerGoesOn", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "test")
			require.NoError(t, err)
			var attachErr error
			var runs atomic.Int32
			_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				runs.Add(1)
				attachErr = idem.Attach(ctx, func() error { return nil }, orderRow{ID: "o-1"})
				if tc.returnAttach {
					return 0, attachErr
				}
				return 1, nil
			})
			require.ErrorIs(t, attachErr, idemstore.ErrInvalidAttach, "refused by Attach, not at completion")
			assert.ErrorContains(t, attachErr, "idem_test.orderRow", "the error names the type")
			if tc.returnAttach {
				require.ErrorIs(t, err, idemstore.ErrInvalidAttach)
			} else {
				require.NoError(t, err, "nothing refused was attached: the completion commits")
			}

			v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
				runs.Add(1)
				return 2, nil
			})
			require.NoError(t, err, "the key is not left in progress")
			assert.Equal(t, tc.wantCompleted, replayed)
			assert.Equal(t, map[bool]int{true: 1, false: 2}[tc.wantCompleted], v)
			assert.Equal(t, map[bool]int32{true: 1, false: 2}[tc.wantCompleted], runs.Load())
		})
	}
}

// TestStoredKeyInTheHandler: the handler reads its request's stored key from its context,
// the key Guard.StoredKey computes, which hides the caller's key. It is the same in every
// run of one request: the first, a retry after a failure, a new owner's after a crash (its
// lease ended and was taken over), a run through a batch, and a fail-open run without a
// lease; another tenant or operation has another; outside a handler there is none.
func TestStoredKeyInTheHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewSettableClock()
	store := memstore.New()
	g, err := idem.New(store, "charge", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)
	req := idem.Request{Key: "secret-key-1", Tenant: "t-1"}
	want, err := g.StoredKey(req)
	require.NoError(t, err)
	assert.NotContains(t, want, req.Key, "the raw key never shows")

	keyOf := func(ctx context.Context) (string, error) { return idem.StoredKey(ctx), nil }
	var got []string

	// A run that fails: the key is released, and the retry runs again.
	_, _, err = idem.Do(ctx, g, req, func(ctx context.Context) (string, error) {
		got = append(got, idem.StoredKey(ctx))
		return "", errors.New("provider down")
	})
	require.Error(t, err)

	// A run that crashes: it stalls past its lease, and a new owner takes the key over.
	started, release := make(chan struct{}), make(chan struct{})
	crashed := make(chan error, 1)
	go func() {
		_, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (string, error) {
			got = append(got, idem.StoredKey(ctx))
			close(started)
			<-release
			return "late", nil
		})
		crashed <- err
	}()
	<-started
	clock.Advance(2 * time.Minute)
	v, _, err := idem.Do(ctx, g, req, keyOf)
	require.NoError(t, err, "the new owner took the key over")
	got = append(got, v)
	close(release)
	require.ErrorIs(t, <-crashed, idem.ErrLeaseLost)

	// Through a batch, for a new request of the same tenant and key: another operation.
	g2, err := idem.New(store, "refund", idem.WithClock(clock))
	require.NoError(t, err)
	b := g2.Claim(ctx, []idem.Request{req, {Key: "pad"}})
	other, _, err := idem.DoClaimed(ctx, b, 0, keyOf)
	require.NoError(t, err)
	b.Settle(ctx)
	wantOther, err := g2.StoredKey(req)
	require.NoError(t, err)
	assert.Equal(t, wantOther, other)
	assert.NotEqual(t, want, other, "another operation")

	// Fail-open: the store is down, the handler runs unguarded, and still knows its key.
	down, err := idem.New(downStore{}, "charge", idem.WithFailOpen(true))
	require.NoError(t, err)
	v, _, err = idem.Do(ctx, down, req, keyOf)
	require.NoError(t, err)
	got = append(got, v)

	downBatch, err := idem.New(downBatchStore{memstore.New()}, "charge", idem.WithFailOpen(true))
	require.NoError(t, err)
	b = downBatch.Claim(ctx, []idem.Request{req, {Key: "pad"}})
	v, _, err = idem.DoClaimed(ctx, b, 0, keyOf)
	require.NoError(t, err)
	b.Settle(ctx)
	got = append(got, v)

	require.Len(t, got, 5)
	for i, k := range got {
		assert.Equal(t, want, k, "run %d", i)
	}
	tenant2, _, err := idem.Do(ctx, g, idem.Request{Key: req.Key, Tenant: "t-2"}, keyOf)
	require.NoError(t, err)
	assert.NotEqual(t, want, tenant2, "another tenant")
	assert.Empty(t, idem.StoredKey(ctx), "outside a handler")
}

// downStore fails every call with a store error.
type downStore struct{ idemstore.Store }

func (downStore) Claim(context.Context, *idemstore.Record, time.Time) (*idemstore.Record, bool, error) {
	return nil, false, errConnReset
}

// downBatchStore fails every batch claim with a store error.
type downBatchStore struct{ *memstore.Store }

func (downBatchStore) ClaimMany(_ context.Context, recs []*idemstore.Record, _ time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	for i := range out {
		out[i].Err = errConnReset
	}
	return out
}

// TestCheckpointAndAttachAcrossACrash is ExampleAttach_withCheckpoint's scenario. An owner
// charges a card (an external effect), checkpoints "charged", attaches the payment row,
// and crashes before completing: it stalls past its lease. A new owner takes the key over,
// finds the checkpoint (so the card is not charged again) but not the row (attached writes
// land only at completion), and attaches the row again: it lands once, with the new
// owner's completion; the first owner's attached row never lands. The second case is the
// mistake the rule forbids: a checkpoint that marks the attached row as written is false
// after the crash, and the row is lost.
func TestCheckpointAndAttachAcrossACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		checkpointTheRow   bool // the mistake: checkpoint "row written" after attaching it
		wantRows, wantRuns int
	}{
		{"EveryOwnerAttaches", false, 1, 2},
		{"CheckpointMarkingTheRowLosesIt", true, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := storetest.NewSettableClock()
			g, err := idem.New(memstore.New(), "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
			require.NoError(t, err)
			var (
				charges, runs atomic.Int32
				rows          []string // written by attached writes, under the store's lock
			)
			pay := func(ctx context.Context) (string, error) {
				runs.Add(1)
				if idem.LastCheckpoint(ctx) == "" {
					charges.Add(1)
					if err := idem.Checkpoint(ctx, "charged"); err != nil {
						return "", err
					}
				}
				if idem.LastCheckpoint(ctx) != "row written" {
					row := "payment:" + idem.StoredKey(ctx) // one id for every owner
					if err := idem.Attach(ctx, func() error { rows = append(rows, row); return nil }); err != nil {
						return "", err
					}
					if tc.checkpointTheRow {
						if err := idem.Checkpoint(ctx, "row written"); err != nil {
							return "", err
						}
					}
				}
				return "paid", nil
			}
			req := idem.Request{Key: "order-7"}

			stalled, resume := make(chan struct{}), make(chan struct{})
			first := make(chan error, 1)
			go func() {
				_, _, err := idem.Do(ctx, g, req, func(ctx context.Context) (string, error) {
					v, err := pay(ctx)
					close(stalled)
					<-resume // the crash: no completion before the lease ends
					return v, err
				})
				first <- err
			}()
			<-stalled
			clock.Advance(2 * time.Minute)

			v, replayed, err := idem.Do(ctx, g, req, pay)
			require.NoError(t, err, "the new owner took over and completed")
			assert.False(t, replayed)
			assert.Equal(t, "paid", v)
			close(resume)
			require.ErrorIs(t, <-first, idem.ErrLeaseLost, "the first owner's completion is fenced off")

			v, replayed, err = idem.Do(ctx, g, req, pay)
			require.NoError(t, err)
			assert.True(t, replayed)
			assert.Equal(t, "paid", v)
			assert.EqualValues(t, 1, charges.Load(), "the card is charged once")
			assert.EqualValues(t, tc.wantRuns, runs.Load())
			require.Len(t, rows, tc.wantRows)
			if tc.wantRows == 1 {
				sk, err := g.StoredKey(req)
				require.NoError(t, err)
				assert.Equal(t, "payment:"+sk, rows[0])
			}
		})
	}
}

func TestAttachOutsideHandler(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, idem.Attach(context.Background(), func() error { return nil }), idem.ErrNoLease)
	assert.Empty(t, idem.LastCheckpoint(context.Background()))
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

// TestStoredKeyOfNestedFailOpenRun: a guarded handler (operation "outer") calls a
// second guard ("inner") whose store fails, with WithFailOpen. The inner handler runs
// unguarded with withStoredKey(ctx, innerKey), but ctx still carries the outer run's lease,
// and StoredKey looks at the lease first: the inner run's identity is the outer key. Two
// inner requests of one outer run then derive the same downstream idempotency key (a
// payment provider dedups the second payment), and the inner run's Attach and Checkpoint
// land on the outer record instead of failing with ErrNoLease.
func TestStoredKeyOfNestedFailOpenRun(t *testing.T) {
	t.Parallel()
	outer, err := idem.New(memstore.New(), "outer")
	require.NoError(t, err)
	faulty := storetest.NewFaulty(memstore.New())
	faulty.Fail("claim", errors.New("store down"), false)
	inner, err := idem.New(faulty, "inner", idem.WithFailOpen(true))
	require.NoError(t, err)

	innerReq := idem.Request{Key: "inner-1"}
	wantInner, err := inner.StoredKey(innerReq)
	require.NoError(t, err)
	wantOuter, err := outer.StoredKey(idem.Request{Key: "outer-1"})
	require.NoError(t, err)

	var gotKey string
	var attachErr, cpErr error
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err = idem.Do(ctx, outer, idem.Request{Key: "outer-1"}, func(ctx context.Context) (int, error) {
		_, _, err := idem.Do(ctx, inner, innerReq, func(ctx context.Context) (int, error) {
			gotKey = idem.StoredKey(ctx)
			attachErr = idem.Attach(ctx, func() error { return nil })
			cpErr = idem.Checkpoint(ctx, "inner-charged")
			return 1, nil
		})
		return 0, err
	})
	require.NoError(t, err)
	t.Logf("inner StoredKey=%q (inner %q, outer %q); Attach: %v; Checkpoint: %v", gotKey, wantInner, wantOuter, attachErr, cpErr)
	assert.Equal(t, wantInner, gotKey, "a fail-open run's StoredKey must be its own key, not the enclosing guarded run's")
	assert.ErrorIs(t, attachErr, idem.ErrNoLease, "an unguarded (fail-open) run has no lease to attach to; it attached to the outer run's")
	assert.Error(t, cpErr, "an unguarded (fail-open) run's Checkpoint wrote the outer record's checkpoint")
}
