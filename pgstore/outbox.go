package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/idemstore"
)

// OutboxSuffix makes the outbox table's name from the records table's: events recorded
// with outbox.Record through a Store of table "idempotency" go to "idempotency_outbox"
// (see [Store.OutboxTable]).
const OutboxSuffix = "_outbox"

// Seeds of the advisory locks that order each ordering key's events. A lock's key is
// [OutboxLockKey]: hashtextextended('<table>:' || ordering_key, seed), so outbox tables
// sharing a database lock apart. Producers take the [OutboxProducerLock] one before their
// event's INSERT (a completion takes all of its events' keys at once, in the order of
// their lock keys, before any attached write, so two completions never deadlock on them)
// and hold it to their commit, so one ordering key's events get their sequence numbers in
// commit order; relays take the [OutboxRelayLock] one while they publish, so two relays
// never publish one key's events at once.
const (
	OutboxProducerLock = 0x1de0
	OutboxRelayLock    = 0x1de1
)

// OutboxLockKey returns the SQL expression of the advisory lock key (a bigint) of the
// ordering key that keyExpr evaluates to, in outbox table table, for seed
// ([OutboxProducerLock] or [OutboxRelayLock]).
func OutboxLockKey(table, keyExpr string, seed int) string {
	return fmt.Sprintf("hashtextextended(%s || %s, %d)", literal(table+":"), keyExpr, seed)
}

// OutboxTable returns the name of the store's outbox table: its records table's name with
// [OutboxSuffix]. Create it with [OutboxSchema].
func (s *Store) OutboxTable() string { return s.table + OutboxSuffix }

// OutboxSchema returns the statements that create an outbox table (see
// [Store.OutboxTable]; "schema.name" is accepted) and its indexes. One row per event:
//
//   - seq (bigint identity, the primary key): the commit order within an ordering key;
//   - id (text, unique): the event id, the consumer's idempotency key;
//   - ordering_key, destination, type (text), payload (bytea), headers (jsonb, an object
//     of strings), stored_key (text), recorded_at (timestamptz): the event as recorded;
//   - committed_at (timestamptz): the database clock when the row was inserted, just
//     before its transaction committed: the outbox lag counts from it;
//   - published_at (timestamptz): when a relay published it; NULL: not yet;
//   - attempts (integer), last_error (text): failed publishes so far, and the last one's
//     error.
//
// Partial indexes on seq and on (ordering_key, seq) hold the unpublished rows (the
// relay's scans and the lag), one on published_at the published ones
// ([OutboxPurgeStatement]).
func OutboxSchema(table string) string {
	t := quote(table)
	pending := quote(lastPart(table) + "_pending")
	heads := quote(lastPart(table) + "_heads")
	published := quote(lastPart(table) + "_published")
	return fmt.Sprintf(`-- idem pgstore outbox
CREATE TABLE IF NOT EXISTS %[1]s (
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- commit order within an ordering key
    id           text        NOT NULL UNIQUE, -- the event id: the consumer's idempotency key
    ordering_key text        NOT NULL,
    destination  text        NOT NULL,
    type         text        NOT NULL,
    payload      bytea,
    headers      jsonb,
    stored_key   text,                    -- the stored key of the request that recorded it
    recorded_at  timestamptz NOT NULL,    -- the producer's clock at outbox.Record
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp(), -- inserted, just before commit
    published_at timestamptz,             -- NULL: not published yet
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text
);
CREATE INDEX IF NOT EXISTS %[2]s ON %[1]s (seq) WHERE published_at IS NULL;
CREATE INDEX IF NOT EXISTS %[4]s ON %[1]s (ordering_key, seq) WHERE published_at IS NULL;
CREATE INDEX IF NOT EXISTS %[3]s ON %[1]s (published_at) WHERE published_at IS NOT NULL;
`, t, pending, published, heads)
}

// OutboxPurgeStatement returns the statement that removes published events older than
// its parameter $1 (an interval, such as '7 days') from an outbox table; run it on a
// schedule (pg_cron, a cron job). For "idempotency_outbox" it reads:
//
//	DELETE FROM "idempotency_outbox" WHERE published_at < now() - $1::interval
//
// Unpublished events are never removed.
func OutboxPurgeStatement(table string) string {
	return fmt.Sprintf(`DELETE FROM %s WHERE published_at < now() - $1::interval`, quote(table))
}

// OutboxChannel returns the LISTEN/NOTIFY channel on which a committed event of an
// outbox table wakes relays: the table's name as given, or, for a name longer than
// PostgreSQL's 63-byte identifiers, "idem_outbox_" and 32 hex digits of its SHA-256.
func OutboxChannel(table string) string {
	if len(table) <= 63 {
		return table
	}
	sum := sha256.Sum256([]byte(table))
	return "idem_outbox_" + hex.EncodeToString(sum[:16])
}

// outboxInsert is the statement that inserts an outbox event: it takes the producer lock
// of the event's ordering key (held to the commit), inserts the row, and notifies the
// table's channel (delivered at the commit; one per transaction and channel).
func outboxInsert(table string) string {
	return fmt.Sprintf(`WITH l AS (SELECT pg_advisory_xact_lock(%[2]s)),
ins AS (
	INSERT INTO %[1]s (id, ordering_key, destination, type, payload, headers, stored_key, recorded_at)
	SELECT $1::text, $2::text, $3::text, $4::text, $5::bytea, $6::jsonb, $7::text, $8::timestamptz FROM l
	RETURNING 1
)
SELECT pg_notify($9::text, '') FROM ins`, quote(table), OutboxLockKey(table, "$2::text", OutboxProducerLock))
}

// outboxLock returns the statement that takes the producer locks of the ordering keys $1
// (a text array), each once, in the order of their lock keys: a completion takes them
// all before any write of its transaction, so two completions whose events share keys
// wait for each other in one order and never deadlock, whatever the order of their
// events. (Volatile output expressions are evaluated after the ORDER BY sort.) Each
// event's INSERT takes its key's lock again, which it then holds already.
func outboxLock(table string) string {
	return fmt.Sprintf(`SELECT pg_advisory_xact_lock(d.l)
FROM (SELECT DISTINCT %s AS l FROM unnest($1::text[]) AS k(key)) AS d
ORDER BY d.l`, OutboxLockKey(table, "k.key", OutboxProducerLock))
}

// outboxKeys returns the ordering keys of the outbox messages among attached.
func outboxKeys(attached []any) []string {
	var keys []string
	for _, a := range attached {
		if m, ok := a.(idemstore.OutboxMessage); ok {
			keys = append(keys, m.OrderingKey)
		}
	}
	return keys
}

// lockOutbox takes, in tx, the producer locks of the ordering keys of the outbox
// messages among attached (see [outboxLock]); nothing without any.
func (s *Store) lockOutbox(ctx context.Context, tx pgx.Tx, attached ...[]any) error {
	var keys []string
	for _, a := range attached {
		keys = append(keys, outboxKeys(a)...)
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, outboxLock(s.OutboxTable()), keys); err != nil {
		return fmt.Errorf("pgstore: outbox producer locks: %w", err)
	}
	return nil
}

// outboxWrites returns attached with each outbox message replaced by the [Write] that
// inserts it into the store's outbox table.
func (s *Store) outboxWrites(attached []any) []any {
	msgs, _ := idemstore.SplitOutbox(attached)
	if len(msgs) == 0 {
		return attached
	}
	out := make([]any, len(attached))
	for i, a := range attached {
		m, ok := a.(idemstore.OutboxMessage)
		if !ok {
			out[i] = a
			continue
		}
		out[i] = s.outboxWrite(m)
	}
	return out
}

// outboxWrite returns the write that inserts m into the store's outbox table.
func (s *Store) outboxWrite(m idemstore.OutboxMessage) Write {
	table := s.OutboxTable()
	sql := outboxInsert(table)
	return func(ctx context.Context, tx pgx.Tx) error {
		var headers []byte
		if len(m.Headers) > 0 {
			var err error
			if headers, err = json.Marshal(m.Headers); err != nil {
				return fmt.Errorf("pgstore: outbox event %s: headers: %w", m.ID, err)
			}
		}
		var stored *string
		if m.StoredKey != "" {
			stored = &m.StoredKey
		}
		_, err := tx.Exec(ctx, sql, m.ID, m.OrderingKey, m.Destination, m.Type, m.Payload, headers, stored, m.RecordedAt, OutboxChannel(table))
		if err != nil {
			return fmt.Errorf("pgstore: outbox event %s: %w", m.ID, err)
		}
		return nil
	}
}

// CreateOutboxTable creates an outbox table and its indexes (see [OutboxSchema]) if they
// do not exist, for tests and local runs, as [CreateTable] does for the records table;
// production schemas belong in the application's migrations.
func CreateOutboxTable(ctx context.Context, db Executor, table string) error {
	if _, err := db.Exec(ctx, OutboxSchema(table), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("pgstore: create outbox table %s: %w", table, err)
	}
	return nil
}

// literalEscaper escapes a string for an E” literal; built once, not per call.
var literalEscaper = strings.NewReplacer(`\`, `\\`, `'`, `''`)

// literal returns v as an SQL string literal (E'…'), for names that go into statement text.
func literal(v string) string {
	return "E'" + literalEscaper.Replace(v) + "'"
}
