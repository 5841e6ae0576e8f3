package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestWithClockReadsDeadlinesOnItsTime backs WithClock's doc: a context's deadline is read
// on the guard's clock. A context.WithTimeout deadline is in wall time, so with a clock far
// behind wall time every lease gets the cap (WithMaxLease plus the margin: a Retry-After
// of 902 s by default), and with a clock far ahead the shortest lease (1 s); a deadline in
// the clock's own time, or no deadline, gives the lease the test means.
func TestWithClockReadsDeadlinesOnItsTime(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name      string
		clock     time.Time
		ctx       func(clock time.Time) (context.Context, context.CancelFunc)
		wantRetry time.Duration
	}{
		{"WallDeadlineClockInThePast", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
			func(time.Time) (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Second)
			}, idem.DefaultMaxLease + idem.DefaultLeaseMargin},
		{"WallDeadlineClockInTheFuture", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			func(time.Time) (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Second)
			}, time.Second},
		{"DeadlineInTheClocksTime", now,
			func(clock time.Time) (context.Context, context.CancelFunc) {
				return context.WithDeadline(context.Background(), clock.Add(30*time.Second))
			}, 30*time.Second + idem.DefaultLeaseMargin},
		{"NoDeadline", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
			func(time.Time) (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			}, 30*time.Second + idem.DefaultLeaseMargin}, // WithLease
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "test", idem.WithLease(30*time.Second),
				idem.WithClock(idem.ClockFunc(func() time.Time { return tc.clock })))
			require.NoError(t, err)
			ctx, cancel := tc.ctx(tc.clock)
			defer cancel()
			var inFlight *idem.InProgressError
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
				// A duplicate arrives while the handler runs.
				_, _, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(context.Context) (int, error) { return 2, nil })
				require.ErrorAs(t, err, &inFlight)
				return 1, nil
			})
			require.NoError(t, err)
			assert.Equal(t, tc.wantRetry, inFlight.RetryAfter)
		})
	}
}
