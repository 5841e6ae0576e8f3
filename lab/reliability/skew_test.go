package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/ddblocal"
)

// TestClockSkew runs an owner until its deadline (a Lambda that uses all its time and is
// frozen there, without releasing the key) while a second caller, whose clock is off by skew, keeps trying to claim the key. The lease the
// owner writes ends at its deadline plus the margin, whatever the owner's clock says, so the
// other caller's clock decides: running ahead by less than the margin, it never claims
// while the owner runs; ahead by more, it does.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	const deadline = 2 * time.Second

	tests := []struct {
		name        string
		margin      time.Duration // 0: idem.DefaultLeaseMargin
		ownerSkew   time.Duration
		callerSkew  time.Duration
		wantOverlap bool
	}{
		{name: "same clocks", margin: 400 * time.Millisecond},
		{name: "caller behind", margin: 400 * time.Millisecond, callerSkew: -time.Second},
		{name: "caller ahead below margin", margin: 400 * time.Millisecond, callerSkew: 300 * time.Millisecond},
		{name: "owner ahead", margin: 400 * time.Millisecond, ownerSkew: 3 * time.Second},
		{name: "owner behind", margin: 400 * time.Millisecond, ownerSkew: -3 * time.Second},
		{name: "default margin, caller ahead 1.5s", callerSkew: 1500 * time.Millisecond},
		// Beyond the margin the guarantee is gone: the caller's clock says the lease ended
		// while the owner still runs.
		{name: "caller ahead above margin", margin: 400 * time.Millisecond, callerSkew: 1500 * time.Millisecond, wantOverlap: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t, raw, table)
			guard := func(skew time.Duration) *idem.Guard {
				opts := []idem.Option{idem.WithScope("skew"), idem.WithClock(idem.ClockFunc(func() time.Time { return time.Now().Add(skew) }))}
				if tc.margin > 0 {
					opts = append(opts, idem.WithLeaseMargin(tc.margin))
				}
				g, err := idem.New(store, "test", opts...)
				require.NoError(t, err)
				return g
			}
			owner, caller := guard(tc.ownerSkew), guard(tc.callerSkew)
			key := "skew-" + tc.name
			_, _, err := idem.Do(t.Context(), owner, idem.Request{Key: "warm-" + key}, func(context.Context) (int, error) { return 0, nil })
			require.NoError(t, err, "a first call warms the client up")

			// The owner works until its deadline, where Lambda freezes it. The caller overlaps
			// it when its handler starts before that deadline, read on the wall clock: a
			// goroutine scheduled late on a loaded machine only makes that later, never earlier.
			var overlap atomic.Bool
			ownerCtx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			ownerDeadline, _ := ownerCtx.Deadline()
			claimed, frozen := make(chan struct{}), make(chan struct{})
			ownerDone := make(chan error, 1)
			go func() {
				_, _, err := idem.Do(ownerCtx, owner, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
					close(claimed)
					<-ctx.Done()
					<-frozen // no release: only the lease's end frees the key
					return "", ctx.Err()
				})
				ownerDone <- err
			}()
			select {
			case <-claimed:
			case err := <-ownerDone:
				t.Fatalf("the owner did not claim: %v", err)
			}

			var got string
			for until := time.Now().Add(10 * time.Second); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
				got, _, err = idem.Do(t.Context(), caller, idem.Request{Key: key}, func(context.Context) (string, error) {
					if time.Now().Before(ownerDeadline) {
						overlap.Store(true)
					}
					return "second", nil
				})
				if !errors.Is(err, idem.ErrInProgress) {
					break
				}
			}
			require.NoError(t, err, fmt.Sprintf("the caller gets the key in the end (%q)", got))
			assert.Equal(t, tc.wantOverlap, overlap.Load(), "the caller ran while the owner still held its lease")
			close(frozen)
			require.Error(t, <-ownerDone)
		})
	}
}
