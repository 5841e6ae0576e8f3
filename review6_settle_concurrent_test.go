package idem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// completeManyHeld is a batch store whose CompleteMany says it was entered, waits for
// release, and then refuses every record with ErrLeaseLost, applying nothing (as a store
// whose records another owner took over meanwhile would answer).
type completeManyHeld struct {
	*memstore.Store
	entered, release chan struct{}
}

func (s *completeManyHeld) CompleteMany(_ context.Context, recs []*idemstore.Record) []error {
	close(s.entered)
	<-s.release
	out := make([]error, len(recs))
	for i := range out {
		out[i] = fmt.Errorf("held: %w", idem.ErrLeaseLost)
	}
	return out
}

// TestReview6_SecondSettleReportsNilWhileFirstStillRecords: Batch.Settle "may run early
// and more than once", and a request whose Settle error is nil is one whose outcome was
// recorded. An early Settle (the deadline's, from a timer) that is still sending a
// completion when the final Settle runs makes the final Settle answer nil for that
// request: it took nothing to record (the early one took it) and reports the settleErr
// known so far, none. The completion then fails, and the only answer the caller acts on
// (the final Settle's, after every DoClaimed returned, as the doc asks) said it was
// recorded.
//
//  1. Claim [k0, k1] with a deadline ahead; DoClaimed(0) succeeds: its outcome waits for
//     Settle.
//  2. An early Settle starts (the deadline nears) and sends the completion; the store holds
//     the answer.
//  3. The final Settle runs now, after every DoClaimed returned: it answers nil for
//     request 0.
//  4. The store answers the early Settle's completion: ErrLeaseLost. Request 0's outcome
//     was never recorded.
//
// (This test runs the final Settle while the first is held; a fix that makes it wait for
// the first must release the store from another goroutine.)
func TestReview6_SecondSettleReportsNilWhileFirstStillRecords(t *testing.T) {
	s := &completeManyHeld{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{})}
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b := g.Claim(ctx, reqs("c", 2))
	_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 1, nil })
	require.NoError(t, err)

	early := make(chan []error, 1)
	go func() { early <- b.Settle(ctx) }()
	<-s.entered

	final := b.Settle(ctx) // every DoClaimed has returned: the answer the caller acts on
	close(s.release)
	first := <-early
	require.ErrorIs(t, first[0], idem.ErrLeaseLost, "the early Settle learned the completion failed")
	assert.Error(t, final[0], "the final Settle said request 0's outcome was recorded; it never was")
}
