package storetest

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
)

// batchDuplicates claims batches ([idem.Guard.Claim]) holding two requests of one key, and
// shows every store answers them alike: the key is claimed and run once, and the other
// request takes that run's outcome. A completed run's result is replayed to it (before
// Settle records it, too); a run that failed and released the key gives it an error
// wrapping the run's, without running it; a request of the key with another payload gets
// [idem.ErrPayloadMismatch]. Whichever of the two DoClaimed reaches first runs; one that
// comes while the run is under way waits for its outcome.
func (h Harness) batchDuplicates(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		deadline bool  // outcomes wait for Settle
		pad      bool  // a second key in the batch, so a batch store claims in a batch
		order    []int // the order of the DoClaimed calls
		fail     bool  // the run fails
		otherFP  bool  // request 1 has another payload
	}{
		{name: "Completed", pad: true, order: []int{0, 1}},
		{name: "CompletedWaitsForSettle", deadline: true, pad: true, order: []int{0, 1}},
		{name: "CompletedAlone", order: []int{0, 1}},
		{name: "LaterRequestFirst", deadline: true, pad: true, order: []int{1, 0}},
		{name: "Failed", pad: true, order: []int{0, 1}, fail: true},
		{name: "FailedWithDeadline", deadline: true, pad: true, order: []int{0, 1}, fail: true},
		{name: "FailedAlone", order: []int{0, 1}, fail: true},
		{name: "OtherPayload", deadline: true, pad: true, order: []int{0, 1}, otherFP: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := h.fixture(t)
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, f.clock.Now().Add(30*time.Second))
				defer cancel()
			}
			k := key(t)
			reqs := []idem.Request{{Key: k, Fingerprint: []byte("a")}, {Key: k, Fingerprint: []byte("a")}}
			if tc.otherFP {
				reqs[1].Fingerprint = []byte("b")
			}
			if tc.pad {
				reqs = append(reqs, idem.Request{Key: k + "/pad"})
			}
			var runs atomic.Int32
			b := f.guard.Claim(ctx, reqs)
			type outcome struct {
				v        result
				replayed bool
				err      error
			}
			var out [2]outcome
			for _, i := range tc.order {
				v, replayed, err := idem.DoClaimed(ctx, b, i, func(context.Context) (result, error) {
					n := int(runs.Add(1))
					if tc.fail {
						return result{}, boom
					}
					return result{N: n, Msg: fmt.Sprint("run by request ", i)}, nil
				})
				out[i] = outcome{v, replayed, err}
			}
			for i, err := range b.Settle(ctx) {
				assert.NoError(t, err, "request %d: recording its outcome", i)
			}
			assert.EqualValues(t, 1, runs.Load(), "the key runs once in the batch")
			first, second := out[tc.order[0]], out[tc.order[1]]
			switch {
			case tc.otherFP:
				require.NoError(t, first.err)
				require.ErrorIs(t, second.err, idem.ErrPayloadMismatch)
			case tc.fail:
				require.ErrorIs(t, first.err, boom)
				require.ErrorIs(t, second.err, boom, "the other request takes the run's failure")
				assert.False(t, second.replayed)
				// The key was released: a retry runs.
				v, replayed, err := idem.Do(context.Background(), f.guard, reqs[0], func(context.Context) (result, error) { return result{N: 9}, nil })
				require.NoError(t, err)
				assert.False(t, replayed)
				assert.Equal(t, 9, v.N)
			default:
				require.NoError(t, first.err)
				assert.False(t, first.replayed)
				require.NoError(t, second.err)
				assert.True(t, second.replayed, "the other request replays the run's result")
				assert.Equal(t, first.v, second.v)
				v, replayed, err := idem.Do(context.Background(), f.guard, reqs[0], func(context.Context) (result, error) { return result{}, nil })
				require.NoError(t, err)
				assert.True(t, replayed)
				assert.Equal(t, first.v, v, "and so does a retry")
			}
		})
	}
	t.Run("WaitsForTheRun", h.batchDuplicateWaits)
}

// batchDuplicateWaits runs the two requests of one key concurrently: the one that comes
// while the other's run is under way waits for it, and replays its result.
func (h Harness) batchDuplicateWaits(t *testing.T) {
	f := h.fixture(t)
	ctx, cancel := context.WithDeadline(context.Background(), f.clock.Now().Add(30*time.Second))
	defer cancel()
	k := key(t)
	reqs := []idem.Request{{Key: k}, {Key: k}, {Key: k + "/pad"}}
	b := f.guard.Claim(ctx, reqs)
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, _, err := idem.DoClaimed(ctx, b, 0, func(context.Context) (result, error) {
			close(started)
			<-release
			return result{N: 1}, nil
		})
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	var v result
	var replayed bool
	go func() {
		var err error
		v, replayed, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (result, error) {
			t.Error("the duplicate ran")
			return result{}, nil
		})
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the duplicate answered before the run finished: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	assert.True(t, replayed)
	assert.Equal(t, 1, v.N)
	for i, err := range b.Settle(ctx) {
		assert.NoError(t, err, "request %d", i)
	}
}
