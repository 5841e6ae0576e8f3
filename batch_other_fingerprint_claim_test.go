package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestBatchOtherFingerprintMeetsTheKeysClaimUntilSettle pins what Guard.Claim documents: a
// request of another fingerprint than the key's first request meets the batch's claim of
// the key until Settle releases it, and answers as Do would at that moment. When the key's
// run failed within a deadline, its release waits for Settle: the claim record (another
// payload, in progress) still holds the key, so the request gets ErrPayloadMismatch
// without running, and a retry after Settle runs it.
//
//  1. Guard.Claim([K/A, K/B, pad]) on a batch store, with a deadline.
//  2. DoClaimed(0) (K/A): the handler fails; the release waits for Settle.
//  3. DoClaimed(1) (K/B): ErrPayloadMismatch, not run.
//  4. Settle releases K; Do(K/B) then runs.
func TestBatchOtherFingerprintMeetsTheKeysClaimUntilSettle(t *testing.T) {
	g, err := idem.New(memstore.New(), "op", idem.WithScope("test"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqB := idem.Request{Key: "K", Fingerprint: []byte("B")}
	b := g.Claim(ctx, []idem.Request{{Key: "K", Fingerprint: []byte("A")}, reqB, {Key: "pad"}})
	errA := errors.New("A failed")
	_, _, err = idem.DoClaimed(ctx, b, 0, func(context.Context) (int, error) { return 0, errA })
	require.ErrorIs(t, err, errA)
	ran := false
	_, _, err = idem.DoClaimed(ctx, b, 1, func(context.Context) (int, error) { ran = true; return 2, nil })
	require.ErrorIs(t, err, idem.ErrPayloadMismatch, "the batch's claim of K, for payload A, holds the key until Settle")
	assert.False(t, ran)
	for i, err := range b.Settle(ctx) {
		require.NoError(t, err, "request %d", i)
	}

	v, replayed, err := idem.Do(ctx, g, reqB, func(context.Context) (int, error) { return 2, nil })
	require.NoError(t, err, "Settle released K: a retry of B runs")
	assert.Equal(t, 2, v)
	assert.False(t, replayed)
}
