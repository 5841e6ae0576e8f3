package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/redisstore"
)

// TestAttachRefused shows that a completion with attached writes is refused with a clear
// error before anything is sent, and that the key is released rather than left stuck in
// progress: the retry runs at once and completes.
func TestAttachRefused(t *testing.T) {
	client, c := countedClient(t)
	clock := storetest.NewClock()
	g, err := idem.New(newStore(t, client), "attach", idem.WithClock(clock), idem.WithScope("attach"))
	require.NoError(t, err)
	ctx := context.Background()
	// Warm the connection and the claim and release scripts.
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "warm"}, func(context.Context) (int, error) { return 0, assert.AnError })
	c.take()
	runs := 0
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, func(ctx context.Context) (int, error) {
		runs++
		return 1, idem.Attach(ctx, "INCR orders")
	})
	require.ErrorIs(t, err, redisstore.ErrAttachUnsupported)
	require.ErrorIs(t, err, idemstore.ErrInvalidAttach, "refused at Attach, in the handler")
	assert.Equal(t, []string{"evalsha", "evalsha"}, c.take(), "the claim and the release: no completion is sent")

	v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
		runs++
		return 2, nil
	})
	require.NoError(t, err, "the key was released: the retry runs at once")
	assert.False(t, replayed)
	assert.Equal(t, 2, v)
	assert.Equal(t, 2, runs)
}
