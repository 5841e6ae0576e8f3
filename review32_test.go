package idem_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// review32Child names the environment variable under which a test runs its scenario in a
// child test binary (started with a GODEBUG setting of its own).
const review32Child = "IDEM_REVIEW32_CHILD"

// runReview32Child runs the test named name again in a child process with GODEBUG set to
// godebug and review32Child set, and fails with the child's output if the child fails.
func runReview32Child(t *testing.T, name, godebug string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), review32Child+"=1", "GODEBUG="+godebug)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child (GODEBUG=%s) failed:\n%s", godebug, out)
}

// TestReview32_PanicNilInAttachedWriteIsNotASuccess: a program built with panicnil=1 (a
// supported GODEBUG setting: `godebug panicnil=1` in go.mod, or //go:debug panicnil=1)
// gets nil from recover() after panic(nil). The guard's recovered() takes "recover()
// returned nil" for "no panic", so an attached write that panics with nil is taken for a
// completion that returned nil: Do returns the result as recorded, fires OnCompleted and
// caches it, while the store still holds the record in progress. Every retry then meets
// ErrInProgress until the lease ends, and the takeover runs the handler again: a double
// execution after a success answer.
//
// Expected: a panic is detected whatever its value (a flag set after the store call
// returns, not recover() != nil), so panic(nil) is concluded as every other panic: the
// record read back, the key released, and Do panics again (never returns success).
func TestReview32_PanicNilInAttachedWriteIsNotASuccess(t *testing.T) {
	if os.Getenv(review32Child) == "" {
		t.Parallel()
		runReview32Child(t, t.Name(), "panicnil=1")
		return
	}
	store := memstore.New()
	completed := 0
	g, err := idem.New(store, "test", idem.WithScope("test"), idem.WithLease(time.Minute),
		idem.WithHooks(idem.Hooks{OnCompleted: func(context.Context, idem.Event) { completed++ }}))
	require.NoError(t, err)
	req := idem.Request{Key: "k"}

	returned := false
	var doErr error
	func() {
		defer func() { _ = recover() }() // nil under panicnil=1: returned tells
		_, _, doErr = idem.Do(context.Background(), g, req, func(ctx context.Context) (int, error) {
			return 1, idem.Attach(ctx, func() error { panic(nil) })
		})
		returned = true
	}()
	assert.False(t, returned && doErr == nil,
		"Do reported success for a completion whose attached write panicked (with nil)")
	assert.Zero(t, completed, "OnCompleted fired for a completion that never committed")

	runs := 0
	_, _, err = idem.Do(context.Background(), g, req, func(context.Context) (int, error) {
		runs++
		return 2, nil
	})
	assert.False(t, errors.Is(err, idem.ErrInProgress),
		"the key is left in progress after a 'successful' completion: a retry waits for the "+
			"lease, then the takeover runs the handler again (err %v)", err)
	assert.Equal(t, 1, runs, "the retry runs the handler: the key was released")
}

// TestReview32_GoexitInSettlesAttachedCallIsResent: Settle makes the batched store call
// with attached writes (here holding one record alone: the other attached nothing) on a
// goroutine of its own, under recovered(). A write that calls runtime.Goexit (t.FailNow,
// t.SkipNow in a test's write; any library doing so) ends that goroutine without a panic:
// recover() returns nil, attachedResults is never set, and
// settleBatchWritten takes the missing answers for errCount, a store failure it resends.
// The completion, whose writes ran (the Goexit came after the write's effect), is sent
// again on the caller's goroutine and its writes run a second time, though the call held
// this record alone ("never resent: its writes may have run"). A write that always exits
// so would end the caller's goroutine too: Settle never returns, it.recording never
// closed for an overlapping Settle.
//
// Expected: a store call that did not return normally (panic or Goexit) is an unknown
// outcome, never resent: read back and concluded as a panic (the request fails), so the
// write runs once.
func TestReview32_GoexitInSettlesAttachedCallIsResent(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"))
	require.NoError(t, err)
	var calls atomic.Int32
	write := func() error {
		if calls.Add(1) == 1 {
			runtime.Goexit() // after the write's effect (the count)
		}
		return nil
	}
	var errs []error
	done := make(chan struct{})
	go func() { // Settle's caller: a Goexit resent onto it ends it
		defer close(done)
		errs = settleAttached(t, g, []string{"k", "plain"}, []func() error{write, nil})
	}()
	<-done
	assert.EqualValues(t, 1, calls.Load(),
		"the write ran again: the completion was resent after its call ended without returning")
	require.Len(t, errs, 2)
	assert.Error(t, errs[0], "a completion whose store call never returned is no success")
	assert.NoError(t, errs[1], "the request beside it")
}

// TestReview32_GoexitInDosAttachedWriteLeavesTheKeyInProgress: a handler that calls
// runtime.Goexit has its key released (runHandler's deferred release runs as the goroutine
// unwinds), but a write it attached that calls Goexit as Do completes unwinds through
// recovered() unseen: nothing reads the record back or releases the key, and OnRunEnd never
// fires. The key stays in progress until its lease ends, so every retry meanwhile gets
// ErrInProgress, and the run opened by OnRun is never ended.
//
// Expected: a completion whose store call did not return (panic or Goexit) is concluded as
// a panic is before the goroutine goes: read back, key released (OnReleased with
// HandlerFailed), OnRunEnd fired; a retry runs the handler.
func TestReview32_GoexitInDosAttachedWriteLeavesTheKeyInProgress(t *testing.T) {
	t.Parallel()
	var runEnds, releases atomic.Int32
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"), idem.WithLease(time.Hour),
		idem.WithHooks(idem.Hooks{
			OnRunEnd:   func(context.Context, idem.Event) { runEnds.Add(1) },
			OnReleased: func(context.Context, idem.Event) { releases.Add(1) },
		}))
	require.NoError(t, err)
	req := idem.Request{Key: "k"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = idem.Do(context.Background(), g, req, func(ctx context.Context) (int, error) {
			return 1, idem.Attach(ctx, func() error { runtime.Goexit(); return nil })
		})
	}()
	<-done
	assert.EqualValues(t, 1, runEnds.Load(), "OnRunEnd for the run whose completion exited")
	assert.EqualValues(t, 1, releases.Load(), "the key released: nothing committed")
	runs := 0
	_, _, err = idem.Do(context.Background(), g, req, func(context.Context) (int, error) {
		runs++
		return 2, nil
	})
	require.NoError(t, err, "the retry meets the key in progress until its lease (an hour) ends")
	assert.Equal(t, 1, runs)
}

// TestReview32_PanicNilInSettlesAttachedWriteIsNotASuccess: the batch path of the hole
// above. Under panicnil=1, Settle's goroutine recovers nil from panic(nil): attachedResults
// is never set, the missing answer is taken for errCount (a store failure) and the
// completion is resent on the caller's goroutine, where the write panics with nil again
// and writeCompletion, its err never assigned, takes it for a nil answer. Settle reports
// the request recorded (nil), the write ran twice, and the record is still in progress:
// the caller acknowledges the message, and a redelivery after the lease runs it again.
//
// Expected: a panic is detected whatever its value, so the request fails with an
// *idem.AttachPanicError, its write runs once (the call held it alone) and its key is
// released.
func TestReview32_PanicNilInSettlesAttachedWriteIsNotASuccess(t *testing.T) {
	if os.Getenv(review32Child) == "" {
		t.Parallel()
		runReview32Child(t, t.Name(), "panicnil=1")
		return
	}
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"), idem.WithLease(time.Minute))
	require.NoError(t, err)
	var calls atomic.Int32
	errs := settleAttached(t, g, []string{"k", "plain"}, []func() error{func() error {
		calls.Add(1)
		panic(nil)
	}, nil})
	require.Len(t, errs, 2)
	var ap *idem.AttachPanicError
	assert.ErrorAs(t, errs[0], &ap, "Settle reported a completion whose write panicked (with nil)")
	assert.NoError(t, errs[1])
	assert.EqualValues(t, 1, calls.Load(), "the write ran again: the call was resent")

	runs := 0
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		runs++
		return 2, nil
	})
	assert.NotErrorIs(t, err, idem.ErrInProgress, "the key is left in progress after a reported success")
	assert.Equal(t, 1, runs, "the retry runs the handler: the key was released")
}

// TestReview32_AttachPanicWithANotCommittedValueIsStillTheHandlers: an attached write that
// panics with an error wrapping idemstore.ErrNotCommitted (a write that calls another
// store and panics with its error, `if err != nil { panic(err) }`) is released with
// HandlerFailed false: reportRelease takes its cause, the *idem.AttachPanicError, for the
// store's "nothing committed", because AttachPanicError.Unwrap reaches the panic value. The
// hooks then count a handler's bug as a store refusal.
//
// Expected (fix31's promise): a panic in an attached write releases the key with
// HandlerFailed true and Err the *idem.AttachPanicError, whatever the panic's value.
func TestReview32_AttachPanicWithANotCommittedValueIsStillTheHandlers(t *testing.T) {
	t.Parallel()
	var events []idem.Event
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"), idem.WithHooks(idem.Hooks{
		OnReleased: func(_ context.Context, e idem.Event) { events = append(events, e) },
	}))
	require.NoError(t, err)
	value := fmt.Errorf("another store refused: %w", idemstore.ErrNotCommitted)
	var got any
	func() {
		defer func() { got = recover() }()
		_, _, _ = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
			return 1, idem.Attach(ctx, func() error { panic(value) })
		})
	}()
	require.Equal(t, value, got, "Do panics again with the value")
	require.Len(t, events, 1, "the key released once")
	var ap *idem.AttachPanicError
	assert.ErrorAs(t, events[0].Err, &ap)
	assert.True(t, events[0].HandlerFailed, "a panic in an attached write is the handler's failure")
}
