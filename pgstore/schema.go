package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaVersion is the version of the table layout [Schema] creates, recorded in the
// table's comment. It changes only with the layout; a record's own schema version is the
// version column.
//
// Schema 2 added the column checkpoint_seq; see [UpgradeStatement] for a table of schema 1.
const SchemaVersion = 2

// DefaultTable is the table name the documentation and examples use.
const DefaultTable = "idempotency"

// Schema returns the statements that create the records table and its index, for table
// (a name, or "schema.name"; quoted as an identifier). Its example prints them for
// [DefaultTable]. The table's columns:
//
//   - id (text, the primary key): "<scope>.<operation>#<sha256 hex>", never the caller's
//     raw key;
//   - status (text): INPROGRESS, COMPLETED or FAILED;
//   - expires_at (timestamptz): past it the record counts as absent; NULL: never;
//   - lease_expires_at (timestamptz): the end of an INPROGRESS record's lease; NULL: none;
//   - validation (text): the hash of the request fingerprint;
//   - data (bytea) and encoding (text): the stored result, encoded (json, json+gzip, none,
//     error);
//   - lease_token (text): the lease owner's random token (fencing);
//   - checkpoint (text): the owner's last progress marker;
//   - version (integer): the record schema version;
//   - checkpoint_seq (bigint, default 0): the checkpoint's number, so late writes never
//     replace a later one.
//
// The only index besides the primary key is on expires_at and serves
// [DeleteExpiredStatement]. Every claim, completion, release and read goes by primary key.
// A comment on the table names the schema version.
//
// A table of schema 1 (without checkpoint_seq) needs [UpgradeStatement] before this version
// of the store uses it; existing rows read their checkpoint number as 0.
func Schema(table string) string {
	t := quote(table)
	index := quote(lastPart(table) + "_expires_at")
	return fmt.Sprintf(`-- idem pgstore schema %[3]d
CREATE TABLE IF NOT EXISTS %[1]s (
    id               text        PRIMARY KEY, -- "<scope>.<operation>#<sha256 hex>": never the caller's raw key
    status           text        NOT NULL,    -- INPROGRESS, COMPLETED or FAILED
    expires_at       timestamptz,             -- past it the record counts as absent; NULL: never
    lease_expires_at timestamptz,             -- end of an INPROGRESS record's lease; NULL: none
    validation       text,                    -- hash of the request fingerprint
    data             bytea,                   -- the stored result, encoded
    encoding         text,                    -- json, json+gzip, none, error
    lease_token      text,                    -- the lease owner's random token (fencing)
    checkpoint       text,                    -- the owner's last progress marker
    version          integer     NOT NULL,    -- record schema version
    checkpoint_seq   bigint      NOT NULL DEFAULT 0 -- the checkpoint's number: late writes never replace a later one
);
COMMENT ON TABLE %[1]s IS 'idem pgstore schema %[3]d';
-- Only for deleting expired records (see DeleteExpired); claims and reads use the key.
CREATE INDEX IF NOT EXISTS %[2]s ON %[1]s (expires_at);
`, t, index, SchemaVersion)
}

// UpgradeStatement returns the statement that brings a table of schema 1 to the layout
// [Schema] creates (schema 2): it adds the column checkpoint_seq, the number of a record's
// checkpoint, which lets a checkpoint write that arrives late (after a later one) change
// nothing. For [DefaultTable] it reads:
//
//	ALTER TABLE "idempotency" ADD COLUMN IF NOT EXISTS checkpoint_seq bigint NOT NULL DEFAULT 0;
//	COMMENT ON TABLE "idempotency" IS 'idem pgstore schema 2';
//
// Adding a column with a constant default rewrites no rows (PostgreSQL 11+) and takes a
// brief ACCESS EXCLUSIVE lock. Run it before deploying this version: without the column
// every statement of the store fails.
func UpgradeStatement(table string) string {
	t := quote(table)
	return fmt.Sprintf("ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS checkpoint_seq bigint NOT NULL DEFAULT 0;\nCOMMENT ON TABLE %[1]s IS 'idem pgstore schema %[2]d';\n", t, SchemaVersion)
}

// Executor runs a statement; *pgxpool.Pool, *pgx.Conn and pgx.Tx have this method.
type Executor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateTable creates table and its index (see [Schema]) if they do not exist, for tests
// and local runs; production schemas belong in the application's migrations, where
// [Schema]'s text can be copied. The statements run in one simple-protocol round trip, so
// they commit together.
func CreateTable(ctx context.Context, db Executor, table string) error {
	if _, err := db.Exec(ctx, Schema(table), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("pgstore: create table %s: %w", table, err)
	}
	return nil
}

// ExpiryGrace is how long after its expires_at [DeleteExpiredStatement] leaves a record: the
// clock skew between the database server and the functions it tolerates. A record past
// its expiry already counts as absent to every claim; deleting it a little later changes
// nothing, while deleting it early, by a server clock ahead of a function's, could let that
// function run a key again that it should have replayed.
const ExpiryGrace = "5 minutes"

// DeleteExpiredStatement returns the statement that deletes the records of table that have
// expired, by the database server's clock less [ExpiryGrace]. Records count as absent from
// their expiry on whether or not they are deleted (as with DynamoDB's lagging TTL), so this
// is housekeeping, not correctness: schedule it, for example every 15 minutes with the
// pg_cron extension:
//
//	SELECT cron.schedule('idem-delete-expired', '*/15 * * * *',
//	  $$DELETE FROM "idempotency" WHERE expires_at < now() - interval '5 minutes'$$);
//
// It uses the index on expires_at. Deleted rows leave dead tuples for autovacuum, as any
// DELETE does; for very large backlogs, run it in smaller batches by adding a key range.
func DeleteExpiredStatement(table string) string {
	return fmt.Sprintf(`DELETE FROM %s WHERE expires_at < now() - interval '%s'`, quote(table), ExpiryGrace)
}

// DeleteExpired runs [DeleteExpiredStatement] for the store's table and returns how many
// records it deleted.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, DeleteExpiredStatement(s.table))
	if err != nil {
		return 0, s.fail("delete expired", err)
	}
	return tag.RowsAffected(), nil
}

// quote quotes a table name, "schema.name" as two identifiers.
func quote(table string) string {
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

// lastPart returns the table name without its schema.
func lastPart(table string) string {
	return table[strings.LastIndex(table, ".")+1:]
}
