package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// resentClaim is a store whose claims take effect but lose their response, after which the
// request is sent again and meets the record it wrote: what the SDK retryer does when a
// connection breaks after DynamoDB applied a PutItem.
type resentClaim struct{ idemstore.Store }

func (s resentClaim) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if _, _, err := s.Store.Claim(ctx, rec, now); err != nil {
		return nil, false, err
	}
	return s.Store.Claim(ctx, rec, now)
}

func TestResentClaimMeetsOwnRecord(t *testing.T) {
	t.Parallel()
	g, err := idem.New(resentClaim{memstore.New()}, "test")
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) (string, error) { runs++; return "done", nil }

	got, replayed, err := idem.Do(t.Context(), g, idem.Request{Key: "k"}, fn)
	require.NoError(t, err, "our own in-progress record is our claim, not another owner's")
	assert.Equal(t, "done", got)
	assert.False(t, replayed)

	got, replayed, err = idem.Do(t.Context(), g, idem.Request{Key: "k"}, fn)
	require.NoError(t, err)
	assert.Equal(t, "done", got)
	assert.True(t, replayed)
	assert.Equal(t, 1, runs)
}
