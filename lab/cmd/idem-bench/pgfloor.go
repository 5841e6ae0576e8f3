package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/lab/bench"
	"github.com/idemkit/idem/pgstore"
)

// pgFloor runs X1 and X2 on PostgreSQL: the two plain statements a hand-written
// idempotency check sends, on the store's table, pool and query mode (and counted by the
// same wrapper), with none of the store's conditions beyond the key and the token.
//   - The claim inserts the in-progress row where none is (ON CONFLICT DO NOTHING) and, in
//     the same statement, reads the row that is there.
//   - The completion updates the row to completed, conditional on the token.
type pgFloor struct {
	b                 *bench.Bench
	db                pgstore.DB
	claimSQL, doneSQL string
	keys              []rawKey
}

func newPGFloor(b *bench.Bench, db pgstore.DB, table string) *pgFloor {
	t := pgx.Identifier{table}.Sanitize()
	return &pgFloor{
		b: b, db: db, keys: newRawKeys(b.Guard, b.Counts().Invocations),
		claimSQL: fmt.Sprintf(`WITH ins AS (
	INSERT INTO %[1]s (id, status, expires_at, lease_expires_at, lease_token, version)
	VALUES ($1::text, 'INPROGRESS', $2::timestamptz, $3::timestamptz, $4::text, 1)
	ON CONFLICT (id) DO NOTHING RETURNING 1
)
SELECT status, data, encoding FROM %[1]s WHERE id = $1::text AND NOT EXISTS (SELECT FROM ins)`, t),
		doneSQL: fmt.Sprintf(`UPDATE %s SET status = 'COMPLETED', expires_at = $2::timestamptz,
	lease_expires_at = NULL, data = $3::bytea, encoding = 'json'
WHERE id = $1::text AND lease_token = $4::text`, t),
	}
}

// claim sends the floor's claim of k by tok, with a lease to ctx's deadline, and reports
// whether it found a row, and that row's status.
func (x *pgFloor) claim(ctx context.Context, k rawKey, tok string) (found bool, status string, err error) {
	lease, _ := ctx.Deadline()
	var data []byte
	var enc *string
	err = x.db.QueryRow(ctx, x.claimSQL, k.key, time.Now().Add(bench.Expiry), lease, tok).Scan(&status, &data, &enc)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, "", nil
	}
	return err == nil, status, err
}

// insertUpdate is X1_raw_sql_insert_update: for each fresh key, the claim and the
// completion.
func (x *pgFloor) insertUpdate() *bench.Result {
	r, failed := x.b.Sequential("X1_raw_sql_insert_update", "invocation", len(x.keys), x.newKey)
	r.Check(failed == 0, "%d claims or completions failed", failed)
	return r
}

// newKey is X1's operation on key i: the claim and the completion.
func (x *pgFloor) newKey(ctx context.Context, i int) bool {
	k, tok := x.keys[i], bench.Token()
	found, _, err := x.claim(ctx, k, tok)
	if err != nil || found {
		return false
	}
	tag, err := x.db.Exec(ctx, x.doneSQL, k.key, time.Now().Add(bench.Expiry), []byte(k.data), tok)
	return err == nil && tag.RowsAffected() == 1
}

// insertConflict is X2_raw_sql_insert_conflict: the same keys again, the claim alone, which
// finds the completed row and returns it.
func (x *pgFloor) insertConflict() *bench.Result {
	r, failed := x.b.Sequential("X2_raw_sql_insert_conflict", "invocation", len(x.keys), x.replay)
	r.Check(failed == 0, "%d claims did not return the completed row", failed)
	return r
}

// replay is X2's operation on key i: the claim, which returns the completed row.
func (x *pgFloor) replay(ctx context.Context, i int) bool {
	found, status, err := x.claim(ctx, x.keys[i], bench.Token())
	return err == nil && found && status == "COMPLETED"
}
