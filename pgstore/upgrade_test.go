package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// schema1 is the table layout of schema 1, before checkpoint_seq.
const schema1 = `CREATE TABLE %s (
    id text PRIMARY KEY, status text NOT NULL, expires_at timestamptz, lease_expires_at timestamptz,
    validation text, data bytea, encoding text, lease_token text, checkpoint text, version integer NOT NULL
)`

// TestUpgradeStatement: a table of schema 1, with a record checkpointed by an owner of the
// previous version, takes UpgradeStatement; its rows read checkpoint number 0, and the
// store then works on it: the next owner takes the record over with its checkpoint and
// numbers its own checkpoints on, and a late write is refused.
func TestUpgradeStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Name("idem")
	_, err := pool.Exec(ctx, fmt.Sprintf(schema1, pgx.Identifier{table}.Sanitize()))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s VALUES ('k', 'INPROGRESS', $1, $2, NULL, NULL, NULL, 'old', 'charged', 1)`,
		pgx.Identifier{table}.Sanitize()), t0.Add(time.Hour), t0.Add(time.Minute))
	require.NoError(t, err)

	_, err = pool.Exec(ctx, pgstore.UpgradeStatement(table), pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	var comment string
	require.NoError(t, pool.QueryRow(ctx, `SELECT obj_description($1::regclass, 'pg_class')`, table).Scan(&comment))
	assert.Equal(t, fmt.Sprintf("idem pgstore schema %d", pgstore.SchemaVersion), comment)

	s, err := pgstore.New(pool, table)
	require.NoError(t, err)
	old, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.NotNil(t, old)
	assert.Equal(t, "charged", old.Checkpoint)
	assert.Zero(t, old.CheckpointSeq, "a row of schema 1 reads number 0")

	now := t0.Add(2 * time.Minute)
	rec := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute), LeaseToken: "new", Checkpoint: "charged", Version: idemstore.SchemaVersion}
	_, claimed, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, claimed, "the claim carrying the checkpoint takes the record over")
	require.NoError(t, s.SetCheckpoint(ctx, "k", "new", "shipped", 1))
	require.ErrorIs(t, s.SetCheckpoint(ctx, "k", "old", "late", 1), idem.ErrLeaseLost)
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "shipped", got.Checkpoint)
	assert.Equal(t, int64(1), got.CheckpointSeq)
}
