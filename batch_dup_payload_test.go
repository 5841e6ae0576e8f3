package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestBatchDuplicateOtherPayloadAnswersAsDo: two requests of one key in a batch, the
// first with a payload that differs from the key's recorded request, the second with
// exactly the recorded request's payload. The second must be answered as Do answers it (a
// replay of the stored result; or, with the key in flight, ErrInProgress, which is
// retryable), not with ErrPayloadMismatch (HTTP 422, permanent) for differing from an
// unrelated request that came first in the batch.
//
//  1. Do(K, payload "b") completes with result 7 (record fingerprint "b"), or is in flight.
//  2. Guard.Claim([K/"a", K/"b", pad]).
//  3. DoClaimed(0): ErrPayloadMismatch ("a" is not the recorded payload).
//  4. DoClaimed(1): replays 7, or ErrInProgress, as Do(K/"b") answers.
func TestBatchDuplicateOtherPayloadAnswersAsDo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool // K is in progress under another caller instead of completed
	}{
		{name: "Completed"},
		{name: "InFlight", inFlight: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := idem.New(memstore.New(), "op", idem.WithScope("test"))
			require.NoError(t, err)
			ctx := context.Background()
			reqB := idem.Request{Key: "K", Fingerprint: []byte("b")}
			reqA := idem.Request{Key: "K", Fingerprint: []byte("a")}

			release := make(chan struct{})
			var wg sync.WaitGroup
			if tc.inFlight {
				started := make(chan struct{})
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, _ = idem.Do(ctx, g, reqB, func(context.Context) (int, error) {
						close(started)
						<-release
						return 7, nil
					})
				}()
				<-started
			} else {
				close(release)
				v, replayed, err := idem.Do(ctx, g, reqB, func(context.Context) (int, error) { return 7, nil })
				require.NoError(t, err)
				require.False(t, replayed)
				require.Equal(t, 7, v)
			}

			// What Do answers request "b" alone, as a control.
			_, _, ctrlErr := idem.Do(ctx, g, reqB, func(context.Context) (int, error) {
				t.Error("control: the handler ran")
				return 0, nil
			})

			b := g.Claim(ctx, []idem.Request{reqA, reqB, {Key: "pad"}})
			_, _, err0 := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) {
				t.Error("request 0 ran")
				return 0, nil
			})
			v1, replayed1, err1 := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
				t.Error("request 1 ran")
				return 0, nil
			})
			_, _, _ = idem.DoClaimed(ctx, b, 2, func(context.Context) (int, error) { return 1, nil })
			b.Settle(ctx)
			if tc.inFlight {
				close(release)
			}
			wg.Wait()

			assert.ErrorIs(t, err0, idem.ErrPayloadMismatch, "request 0's payload is not the recorded one")
			if tc.inFlight {
				require.ErrorIs(t, ctrlErr, idem.ErrInProgress, "control: Do answers the recorded payload 'in progress'")
				assert.ErrorIs(t, err1, idem.ErrInProgress, "request 1 carries the payload in flight: it must be told the key is in progress (retryable), as Do tells it")
				assert.NotErrorIs(t, err1, idem.ErrPayloadMismatch, "request 1's payload is the one in flight")
			} else {
				require.NoError(t, ctrlErr, "control: Do replays the recorded payload's result")
				assert.NoError(t, err1, "request 1 carries the recorded payload: it must replay, as Do does")
				assert.True(t, replayed1)
				assert.Equal(t, 7, v1)
			}
		})
	}
}

// TestBatchDuplicateOtherPayloadRunsAfterRelease: two requests of one key in a batch with
// different payloads. The first runs and fails: its key is released (a tombstone nobody
// holds), so request 1, with its own payload, runs, as Do runs it; it must not be told
// ErrPayloadMismatch (HTTP 422, permanent) for a payload that holds no key.
//
//  1. Guard.Claim([K/"a", K/"b", pad]).
//  2. DoClaimed(0) fails: K released.
//  3. DoClaimed(1) runs K/"b" and records it: Do(K/"b") right after replays its result.
func TestBatchDuplicateOtherPayloadRunsAfterRelease(t *testing.T) {
	g, err := idem.New(memstore.New(), "op", idem.WithScope("test"))
	require.NoError(t, err)
	ctx := context.Background()
	boom := errors.New("boom")
	reqA := idem.Request{Key: "K", Fingerprint: []byte("a")}
	reqB := idem.Request{Key: "K", Fingerprint: []byte("b")}
	b := g.Claim(ctx, []idem.Request{reqA, reqB, {Key: "pad"}})
	_, _, err0 := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 0, boom })
	require.ErrorIs(t, err0, boom)
	v1, replayed1, err1 := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { return 2, nil })
	_, _, _ = idem.DoClaimed(ctx, b, 2, func(context.Context) (int, error) { return 1, nil })
	for i, err := range b.Settle(ctx) {
		assert.NoError(t, err, "request %d", i)
	}
	require.NoError(t, err1, "request 0 left nothing: its payload holds no key")
	assert.False(t, replayed1)
	assert.Equal(t, 2, v1)

	v, replayed, err := idem.Do(ctx, g, reqB, func(context.Context) (int, error) {
		t.Error("K/b ran again")
		return 3, nil
	})
	require.NoError(t, err)
	assert.True(t, replayed, "request 1's run was recorded")
	assert.Equal(t, 2, v)
}

// TestBatchDuplicateOtherPayloadAfterRun: a request of a key that an earlier request of
// the batch carries with another fingerprint answers, once the key's run is over, from
// the record it left: its result when the fingerprints are compatible (one is empty),
// even while it waits for Settle, else ErrPayloadMismatch; it never runs.
func TestBatchDuplicateOtherPayloadAfterRun(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second []byte
		mismatch      bool
	}{
		{name: "Other", first: []byte("a"), second: []byte("b"), mismatch: true},
		{name: "SecondEmpty", first: []byte("a")},
		{name: "FirstEmpty", second: []byte("b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := idem.New(memstore.New(), "op", idem.WithScope("test"))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline: outcomes wait for Settle
			defer cancel()
			b := g.Claim(ctx, []idem.Request{{Key: "K", Fingerprint: tc.first}, {Key: "K", Fingerprint: tc.second}, {Key: "pad"}})
			v0, _, err0 := idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 5, nil })
			require.NoError(t, err0)
			require.Equal(t, 5, v0)
			v1, replayed1, err1 := idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) {
				t.Error("request 1 ran")
				return 6, nil
			})
			_, _, _ = idem.DoClaimed(ctx, b, 2, func(context.Context) (int, error) { return 1, nil })
			for i, err := range b.Settle(ctx) {
				assert.NoError(t, err, "request %d", i)
			}
			if tc.mismatch {
				assert.ErrorIs(t, err1, idem.ErrPayloadMismatch)
				return
			}
			require.NoError(t, err1)
			assert.True(t, replayed1)
			assert.Equal(t, 5, v1)
		})
	}
}
