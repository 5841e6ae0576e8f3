package pgoutbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

// TestReadBacklog: an empty outbox has no backlog; committed events count, the oldest is
// the first committed, with its failed attempts and last error once a relay's publish
// failed; after a pass that publishes all, none is left. A table name is required.
func TestReadBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b, err := pgoutbox.ReadBacklog(ctx, e.pool, e.store.OutboxTable())
	require.NoError(t, err)
	assert.Equal(t, pgoutbox.Backlog{}, b)

	first := e.produce(t, "k-1", "acct-1", "a", "b")
	e.produce(t, "k-2", "acct-2", "c")
	rec := &recorder{fail: func(m outbox.Message, attempt int) bool { return m.ID == first[0] && attempt == 1 }}
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec)
	require.NoError(t, err)
	p, err := r.RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, pgoutbox.Pass{Published: 1, Failed: 1}, p, "acct-2's event out; acct-1's first failed, its second held")

	b, err = pgoutbox.ReadBacklog(ctx, e.pool, e.store.OutboxTable())
	require.NoError(t, err)
	assert.Equal(t, int64(2), b.Count)
	assert.Positive(t, b.Lag)
	require.NotNil(t, b.Oldest)
	assert.Equal(t, first[0], b.Oldest.ID)
	assert.Equal(t, "acct-1", b.Oldest.OrderingKey)
	assert.Equal(t, "q", b.Oldest.Destination)
	assert.Equal(t, "a", b.Oldest.Type)
	assert.Equal(t, 1, b.Oldest.Attempts)
	assert.NotEmpty(t, b.Oldest.LastError)
	assert.WithinDuration(t, time.Now(), b.Oldest.CommittedAt, time.Hour, "a time, by the database clock")
	lag, err := r.Lag(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, lag, b.Lag, "the same age, measured later")

	_, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	_, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	b, err = pgoutbox.ReadBacklog(ctx, e.pool, e.store.OutboxTable())
	require.NoError(t, err)
	assert.Equal(t, pgoutbox.Backlog{}, b)

	_, err = pgoutbox.ReadBacklog(ctx, e.pool, "")
	assert.ErrorIs(t, err, idem.ErrInvalidOption)
}
