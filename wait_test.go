package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// TestWaitEndsBeforeTheDeadline lets a WithWait caller wait, in simulated time, for a key
// whose owner never finishes: it must answer ErrInProgress by its context's deadline less
// the lease margin (in Lambda, the function timeout: a waiter that runs into it is billed
// for the whole timeout and answers nothing), or at the end of its wait budget if that
// comes first, and never run the handler.
func TestWaitEndsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	const budget, margin = time.Minute, 2 * time.Second
	tests := []struct {
		name        string
		deadline    time.Duration // from the call; 0 for none
		wantElapsed time.Duration
	}{
		{name: "deadline within the budget", deadline: 10 * time.Second, wantElapsed: 8 * time.Second},
		{name: "deadline within the margin", deadline: time.Second, wantElapsed: 0},
		{name: "deadline after the budget", deadline: 2 * time.Minute, wantElapsed: budget},
		{name: "no deadline", wantElapsed: budget},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewManualClock()
			s := memstore.New()
			// The owner's lease outlives any wait. Its clock reads the same time, but its
			// timers (the lease watchdog's) are not the ones the test drives.
			owner, err := idem.New(s, "test", idem.WithClock(storetest.NewClock()), idem.WithLease(time.Hour), idem.WithMaxLease(time.Hour))
			require.NoError(t, err)
			waiter, err := idem.New(s, "test", idem.WithClock(clock), idem.WithLeaseMargin(margin), idem.WithWait(budget, time.Second))
			require.NoError(t, err)

			holdKey(t, owner, "k")

			ctx, cancel := context.WithCancel(deadlineIn(t, clock, tc.deadline))
			defer cancel()
			// Move the clock to each timer the waiter sets, until it answers. Should it hang,
			// the bound ends the wait with its context.
			driving, stop := context.WithTimeout(context.Background(), 30*time.Second)
			defer stop()
			driven := make(chan struct{})
			go func() {
				defer close(driven)
				for n := 1; clock.WaitAfterCalls(driving, n) && clock.AdvanceToNext(driving); n++ {
				}
				if driving.Err() == context.DeadlineExceeded {
					cancel()
				}
			}()
			start := clock.Now()
			_, _, err = idem.Do(ctx, waiter, idem.Request{Key: "k"}, func(context.Context) (int, error) {
				t.Error("the waiter ran the handler")
				return 0, nil
			})
			elapsed := clock.Now().Sub(start)
			stop()
			<-driven
			var ipe *idem.InProgressError
			require.ErrorAs(t, err, &ipe)
			assert.Positive(t, ipe.RetryAfter)
			assert.Equal(t, tc.wantElapsed, elapsed, "simulated time spent waiting")
		})
	}
}

// cancelDuringGet is a store whose reads end the caller's context while in flight and then
// fail with the context's error, as an SDK call does when its context ends.
type cancelDuringGet struct {
	*memstore.Store
	cancel context.CancelCauseFunc
	cause  error
}

func (s *cancelDuringGet) Get(ctx context.Context, _ string) (*idemstore.Record, error) {
	s.cancel(s.cause)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestWaitEndedDuringAPoll: a caller whose context ends while a poll is in flight gets its
// context's cause, as when it ends between polls, not a store error.
func TestWaitEndedDuringAPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s := &cancelDuringGet{Store: memstore.New(), cancel: cancel, cause: errors.New("caller gave up")}
	owner, err := idem.New(s.Store, "test")
	require.NoError(t, err)
	waiter, err := idem.New(s, "test", idem.WithWait(time.Minute, time.Millisecond))
	require.NoError(t, err)
	holdKey(t, owner, "w")
	_, _, err = idem.Do(ctx, waiter, idem.Request{Key: "w"}, func(context.Context) (int, error) { return 2, nil })
	require.ErrorIs(t, err, s.cause)
	assert.NotErrorIs(t, err, idem.ErrStore)
}
