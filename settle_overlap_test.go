//go:build go1.25

package idem_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// completeManyHeld is a batch store whose CompleteMany says it was entered, waits for
// release, and then answers each record with answer (nil: it applies them). Refused, it
// applies nothing, as a store whose records another owner took over meanwhile would.
type completeManyHeld struct {
	*memstore.Store
	entered, release chan struct{}
	answer           error
}

func (s *completeManyHeld) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	close(s.entered)
	<-s.release
	if s.answer == nil {
		return s.Store.CompleteMany(ctx, recs)
	}
	out := make([]error, len(recs))
	for i := range out {
		out[i] = fmt.Errorf("held: %w", s.answer)
	}
	return out
}

// TestSettleWaitsForAnOverlappingSettlesRecording: Batch.Settle may run early and more than
// once, and a request whose Settle error is nil is one whose outcome was recorded. A Settle
// that runs while an earlier one (the deadline's, from a timer) still records an outcome
// waits for that recording and answers its result, for every request of the key. Review 6
// found that it answered nil at once (it had nothing to record itself), and the completion
// then failed: the only answer the caller acts on said the outcome was recorded.
//
//  1. Claim [c0, c1, c0 again] with a deadline ahead; DoClaimed(0) succeeds, its duplicate
//     replays: the outcome waits for Settle.
//  2. An early Settle starts and sends the completion; the store holds the answer.
//  3. The final Settle runs now, after every DoClaimed returned: it waits (synctest.Wait
//     sees it blocked).
//  4. The store answers the early Settle's completion: ErrLeaseLost (subtest Refused), or
//     it applies it (Recorded). Both Settles answer that, for request 0 and its duplicate.
func TestSettleWaitsForAnOverlappingSettlesRecording(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
	}{
		{name: "Refused", answer: idem.ErrLeaseLost},
		{name: "Recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &completeManyHeld{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{}), answer: tc.answer}
				g, err := idem.New(s, "test", idem.WithScope("test"))
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				b := g.Claim(ctx, []idem.Request{{Key: "c0"}, {Key: "c1"}, {Key: "c0"}})
				_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 1, nil })
				require.NoError(t, err)
				v, replayed, err := idem.DoClaimed(ctx, b, 2, func(context.Context) (int, error) { return 2, nil })
				require.NoError(t, err)
				require.True(t, replayed)
				require.Equal(t, 1, v)

				early := make(chan []error, 1)
				go func() { early <- b.Settle(ctx) }()
				<-s.entered

				final := make(chan []error, 1)
				go func() { final <- b.Settle(ctx) }() // every DoClaimed has returned: the answer the caller acts on
				synctest.Wait()                        // the final Settle is blocked, or has answered
				select {
				case errs := <-final:
					t.Fatalf("the final Settle answered %v while the early one still recorded request 0's outcome", errs)
				default:
				}
				close(s.release)
				first, last := <-early, <-final
				for _, i := range []int{0, 2} {
					if tc.answer == nil {
						assert.NoError(t, first[i], "request %d: the early Settle", i)
						assert.NoError(t, last[i], "request %d: the final Settle", i)
						continue
					}
					assert.ErrorIs(t, first[i], tc.answer, "request %d: the early Settle learned the completion failed", i)
					assert.ErrorIs(t, last[i], tc.answer, "request %d: the final Settle said the outcome was recorded; it never was", i)
				}
			})
		})
	}
}
