package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestReview33_HookPanicInPlainSettleLeavesAttachedRecordingOpen: Settle records the
// outcomes without attached writes (the plain path, on the caller's goroutine) while the
// goroutine making the attached call runs, and concludes the attached ones only after
// wg.Wait. fix32's deferred close in settleBatchWritten closes the recordings of the call
// being concluded when a hook panics (or calls runtime.Goexit) there, but a panic in the
// plain path's hooks (here OnCompleted) leaves Settle before the attached outcomes are
// concluded: their recordings, opened when Settle took them, are never closed, and their
// records are never concluded by this Settle. Any later or overlapping Settle of the
// batch (the caller recovered the hook's panic; the batch engine's final settle after
// settleWhenLate's goroutine exited on a hook's Goexit) waits on them for ever: Process
// hangs.
//
// Expected: every recording Settle opened is closed whatever way Settle leaves (a
// not-concluded outcome answers an error, e.g. a *StoreError with OpCommit), so a later
// Settle returns.
func TestReview33_HookPanicInPlainSettleLeavesAttachedRecordingOpen(t *testing.T) {
	t.Parallel()
	var panicked, settling atomic.Bool
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"), idem.WithHooks(idem.Hooks{
		OnCompleted: func(context.Context, idem.Event) {
			// The first is the plain outcome's: the attached ones are concluded after it.
			if settling.Load() && panicked.CompareAndSwap(false, true) {
				panic("the hook's bug")
			}
		},
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{{Key: "attached"}, {Key: "plain"}})
	for i := range 2 {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (int, error) {
			if i == 0 {
				return i, idem.Attach(ctx, func() error { return nil })
			}
			return i, nil
		})
		require.NoError(t, err, "request %d: its outcome waits for Settle", i)
	}
	settling.Store(true)
	func() {
		defer func() { _ = recover() }()
		b.Settle(ctx)
	}()
	require.True(t, panicked.Load(), "the hook panicked in the first Settle")

	done := make(chan []error, 1)
	go func() { done <- b.Settle(ctx) }()
	select {
	case errs := <-done:
		assert.Len(t, errs, 2)
	case <-time.After(10 * time.Second): // a hang, not a timing: Settle's calls are in memory
		t.Fatal("the second Settle never returned: the attached outcome's recording, " +
			"opened by the first Settle, was never closed")
	}
}
