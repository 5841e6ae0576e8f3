package idem_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// sizeLimited is a store with attached writes run as code (memstore's func() error, as
// pgstore's Attach closures) and an item size limit it checks before sending anything, as
// redisstore's and DynamoDB's stores do: a completion whose result is over limit bytes
// yields idemstore.ErrTooLarge, and no write runs. The guard then writes the completion
// again without the result (concludeCompletion), with its attached writes: that is the
// first time they run.
type sizeLimited struct {
	*memstore.Store
	limit int
}

func (s sizeLimited) check(rec *idemstore.Record) error {
	if len(rec.Data) > s.limit {
		return fmt.Errorf("sizeLimited: complete: %w: %d bytes, limit %d", idemstore.ErrTooLarge, len(rec.Data), s.limit)
	}
	return nil
}

func (s sizeLimited) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if err := s.check(rec); err != nil {
		return err
	}
	return s.Store.Complete(ctx, rec, attached)
}

func (s sizeLimited) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		out[i] = s.Complete(ctx, r, nil)
	}
	return out
}

func (s sizeLimited) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	out := make([]error, len(recs))
	for i, r := range recs {
		out[i] = s.Complete(ctx, r, attached[i])
	}
	return out
}

// bigResult is a handler's result over sizeLimited's limit.
const bigResult = "a result well over the store's item size limit of sixteen bytes"

// TestReview31_DoReleasesTheKeyWhenTheBareResendPanics: fix28 says (Do's doc, settle's
// comment) "A write fn attached that panics as the store completes is fn's panic: Do reads
// the record back, releases the key unless the completion committed, and the panic goes
// on." Guard.settle sets `returned = true` once the first writeCompletion returns, before
// settleWritten; but settleWritten → concludeCompletion writes the completion again, with
// its attached writes, after idemstore.ErrTooLarge (the result dropped). A write that
// panics there (here: the first time it runs at all, since the store refused the record
// before running any) escapes with no read-back and no release: the key stays in progress,
// owned by nobody, until its lease ends, and every retry meanwhile gets ErrInProgress.
//
// Expected: the panic goes on, and the key is released first, so the retry runs at once
// (as TestDoReleasesTheKeyWhenAnAttachedWritePanics shows for the first write). On main the
// retry gets idem.ErrInProgress.
func TestReview31_DoReleasesTheKeyWhenTheBareResendPanics(t *testing.T) {
	t.Parallel()
	g, err := idem.New(sizeLimited{memstore.New(), 16}, "test", idem.WithScope("test"), idem.WithLease(time.Hour))
	require.NoError(t, err)
	req := idem.Request{Key: "k"}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_, _, _ = idem.Do(context.Background(), g, req, func(ctx context.Context) (string, error) {
			return bigResult, idem.Attach(ctx, panicky)
		})
	}()
	require.Equal(t, "the handler's bug: index out of range in the write", recovered, "the panic goes on, as it was")

	runs := 0
	_, _, err = idem.Do(context.Background(), g, req, func(context.Context) (string, error) {
		runs++
		return "small", nil
	})
	require.NoError(t, err, "the key of the panicking completion was left in progress, not released")
	assert.Equal(t, 1, runs)
}

// TestReview31_SettleRecoversAPanicInTheBareResend: fix28 says Settle recovers a panic of
// an attached write and returns an *idem.AttachPanicError, the key released ("a panicking
// attached write no longer crashes the process from Batch.Settle"). It recovers the batch
// store call and the resend alone, but not the resend without the result that
// concludeCompletion makes after idemstore.ErrTooLarge, which runs the attached writes
// again (here for the first time: the store refused the record before running any). The
// panic escapes Settle: Settle's caller gets it (the batch engine's settleWhenLate calls
// Settle on a goroutine of its own, where it kills the process), no error is returned, the
// key stays in progress until its lease ends, and the recording channel of the request
// (and of every request concluded after it) is never closed, so an overlapping Settle waits
// for it forever.
//
// Expected: Settle returns, with an *idem.AttachPanicError for the request, and its key
// released, so the retry runs at once. On main Settle panics.
func TestReview31_SettleRecoversAPanicInTheBareResend(t *testing.T) {
	t.Parallel()
	g, err := idem.New(sizeLimited{memstore.New(), 16}, "test", idem.WithScope("test"), idem.WithLease(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{{Key: "p"}, {Key: "f"}})
	var fine atomic.Int32
	_, _, err = idem.DoClaimed(ctx, b, 0, func(ctx context.Context) (string, error) {
		return bigResult, idem.Attach(ctx, panicky)
	})
	require.NoError(t, err, "its outcome waits for Settle")
	_, _, err = idem.DoClaimed(ctx, b, 1, func(ctx context.Context) (string, error) {
		return "small", idem.Attach(ctx, func() error { fine.Add(1); return nil })
	})
	require.NoError(t, err, "its outcome waits for Settle")

	var errs []error
	var escaped any
	func() {
		defer func() { escaped = recover() }()
		errs = b.Settle(ctx)
	}()
	require.Nil(t, escaped, "the attached write's panic escaped Settle")
	var ap *idem.AttachPanicError
	require.ErrorAs(t, errs[0], &ap)
	assert.NoError(t, errs[1])
	assert.EqualValues(t, 1, fine.Load())

	runs := 0
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "p"}, func(context.Context) (string, error) {
		runs++
		return "small", nil
	})
	require.NoError(t, err, "the key was released")
	assert.Equal(t, 1, runs)
}

// TestReview31_AttachPanicIsTheHandlersFailureInTheHooks: Do's doc (fix28) says "A write fn
// attached that panics as the store completes is fn's panic", Settle's error for it is
// "as if its handler had panicked", and the batch engine reports it as ReasonPanic. The
// hooks say otherwise: the guard reads the record back, wraps the panic in a StoreError of
// Op "complete" wrapping idemstore.ErrNotCommitted, and so fires OnStoreError (the store
// did not fail: a handler's bug pages whoever watches store errors), then OnReleased with
// HandlerFailed false, which Event documents as "the handler failed (returned an error,
// or panicked)" and as false only for a completion that committed nothing or a batch
// request not started.
//
// Expected: no OnStoreError for a panic of the handler's own write, and OnReleased with
// HandlerFailed true, on Do's path and in Settle alike. On main OnStoreError fires and
// HandlerFailed is false on both.
func TestReview31_AttachPanicIsTheHandlersFailureInTheHooks(t *testing.T) {
	t.Parallel()
	type seen struct {
		storeErrors   atomic.Int32
		released      atomic.Int32
		handlerFailed atomic.Int32
	}
	guard := func(t *testing.T, s *seen) *idem.Guard {
		g, err := idem.New(memstore.New(), "test", idem.WithScope("test"), idem.WithHooks(idem.Hooks{
			OnStoreError: func(context.Context, idem.Event) { s.storeErrors.Add(1) },
			OnReleased: func(_ context.Context, e idem.Event) {
				s.released.Add(1)
				if e.HandlerFailed {
					s.handlerFailed.Add(1)
				}
			},
		}))
		require.NoError(t, err)
		return g
	}
	t.Run("Do", func(t *testing.T) {
		t.Parallel()
		var s seen
		g := guard(t, &s)
		func() {
			defer func() { _ = recover() }()
			_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
				return 1, idem.Attach(ctx, panicky)
			})
		}()
		assert.EqualValues(t, 1, s.released.Load(), "the key released")
		assert.Zero(t, s.storeErrors.Load(), "OnStoreError fired for the handler's own panic")
		assert.EqualValues(t, 1, s.handlerFailed.Load(), "released with HandlerFailed false after the handler's panic")
	})
	t.Run("Settle", func(t *testing.T) {
		t.Parallel()
		var s seen
		g := guard(t, &s)
		// Two keys: a batch of one key is claimed as Do claims it.
		errs := settleAttached(t, g, []string{"p", "plain"}, []func() error{panicky, nil})
		var ap *idem.AttachPanicError
		require.ErrorAs(t, errs[0], &ap)
		assert.EqualValues(t, 1, s.released.Load(), "the key released")
		assert.Zero(t, s.storeErrors.Load(), "OnStoreError fired for the handler's own panic")
		assert.EqualValues(t, 1, s.handlerFailed.Load(), "released with HandlerFailed false after the handler's panic")
	})
}
