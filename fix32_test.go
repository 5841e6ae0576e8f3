package idem_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestSettleGoexitInAResendLeavesNoRecordingOpen: a batched call of several records whose
// attached write calls runtime.Goexit is unknown for every record, so each is resent alone
// on Settle's caller's goroutine; the write exits again there and the goroutine goes. The
// records not yet concluded must not keep their recording open: an overlapping or later
// Settle waits for it, and would wait for ever. It gets an error for each (unknown: a
// *idem.StoreError with Op OpCommit, or the request's own conclusion).
func TestSettleGoexitInAResendLeavesNoRecordingOpen(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("test"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, []idem.Request{{Key: "exits"}, {Key: "other"}})
	writes := []func() error{func() error { runtime.Goexit(); return nil }, func() error { return nil }}
	for i := range writes {
		_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (int, error) {
			return i, idem.Attach(ctx, writes[i])
		})
		require.NoError(t, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Settle(ctx)
	}()
	<-done
	again := make(chan []error)
	go func() { again <- b.Settle(ctx) }()
	select {
	case errs := <-again:
		require.Len(t, errs, 2)
		assert.Error(t, errs[0], "the request whose write exited")
		assert.Error(t, errs[1], "the request never concluded: its outcome is unknown")
	case <-ctx.Done():
		t.Fatal("Settle waits for ever for the recording the exited Settle left open")
	}
}
