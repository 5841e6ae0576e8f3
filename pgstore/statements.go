package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// columns are the record's columns, in the order scanRecord reads them.
const columns = `id, status, expires_at, lease_expires_at, validation, data, encoding, lease_token, checkpoint, version, checkpoint_seq`

// noRecord is the columns of the claim's answer when it wins: no record.
const noRecord = `NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::bytea,
	NULL::text, NULL::text, NULL::text, NULL::integer, NULL::bigint`

// claimable is the claim condition on the record r: see the claim statement.
const claimable = `r.expires_at <= $11::timestamptz
		OR (r.status = 'INPROGRESS' AND r.lease_expires_at <= $11::timestamptz
			AND r.lease_token IS DISTINCT FROM $13::text
			AND CASE WHEN coalesce(r.checkpoint, '') = '' THEN $9::text IS NULL
				ELSE r.checkpoint = $9::text AND r.checkpoint_seq = $12::bigint
					AND coalesce(r.validation, '') = coalesce($5::text, '') END)`

// snapshotAnswers is the condition under which the claim answers a refusal from its
// snapshot (see the claim statement and Store.claimSQL): the session's commits wait for no
// synchronous standby, because none is configured or because its synchronous_commit (off,
// local) does not wait. Otherwise the claim locks the record, so its own commit waits for
// a standby to confirm every commit before it, the one it answers from included. A
// setting the server does not know reads as empty. It holds no column: PostgreSQL
// evaluates it once per statement.
const snapshotAnswers = `(coalesce(current_setting('synchronous_standby_names', true), '') = ''
		OR current_setting('synchronous_commit') IN ('off', 'local'))`

// statements holds the store's SQL for one table. Every parameter carries a cast, so the
// statements run unchanged in every pgx query mode, QueryExecModeExec and the simple
// protocol included (see the package documentation on RDS Proxy).
type statements struct {
	claim, get, complete, tokenStatus, completeOwned, ownedCheck, release, extend, checkpoint string
	// claimLocking is the claim without the snapshot read: see Store.claimSQL.
	claimLocking string
	// commitCheck is the check sent with COMMIT (see Store.commitCheck) as a statement of
	// three parameters, prepared under commitCheckName; commitCheckPrefix is its text up to
	// its WHERE, for the check with the values inlined.
	commitCheck, commitCheckName, commitCheckPrefix string
	// escape doubles backslashes and quotes, for literal.
	escape *strings.Replacer
}

// literal returns v as a PostgreSQL escape-string constant.
func (st *statements) literal(v string) string {
	return "E'" + st.escape.Replace(v) + "'"
}

func newStatements(table string) statements {
	t := quote(table)
	checkPrefix := fmt.Sprintf(`SELECT ('%s: ' || count(*))::integer FROM %s
`, commitCheckMarker, t)
	check := checkPrefix + `WHERE id = $1::text AND lease_token = $2::text AND status = $3::text HAVING count(*) = 0`
	sum := sha256.Sum256([]byte(check))
	return statements{
		commitCheck: check, commitCheckPrefix: checkPrefix,
		// Named after the text (and so the table), as pgx names the statements it caches.
		commitCheckName: "idem_commit_check_" + hex.EncodeToString(sum[:12]),
		escape:          strings.NewReplacer(`\`, `\\`, `'`, `''`),

		// One statement whether it wins or not, one round trip. refused reads the record
		// in the statement's snapshot, with no lock, if the claim condition does not hold
		// on it (IS NOT TRUE: a NULL is a refusal, as in the upsert's WHERE). The
		// condition: expired, or in progress with its lease ended, not the tombstone of the
		// release of the claim's own token ($13, idemstore.ReleasedToken of it: a late
		// attempt of a claim whose owner released the key since), and either no checkpoint
		// where the claim carries none ($9, NULL for none) or the checkpoint the claim
		// carries with its number ($12) for the same request (the fingerprint $5, NULL and
		// empty alike). It reads nothing where the session's commits wait for a
		// synchronous standby (snapshotAnswers): there the claim is claimLocking's.
		//
		// A record the snapshot holds and the condition refuses is the answer: the claim
		// inserts nothing, locks nothing and returns it. That is sound because READ
		// COMMITTED takes the snapshot when the statement starts and sees every commit
		// made before: the record was the key's committed state at an instant within the
		// call, the claim would have been refused by it then, and a refused claim writes
		// nothing, so answering as of that instant is answering as a claim sent then would
		// have been. A replay, a live lease, a checkpoint not carried, the tombstone of the
		// claim's own release: none takes a row lock or a transaction ID, as the raw
		// INSERT ... ON CONFLICT DO NOTHING read takes none.
		//
		// Otherwise (no record in the snapshot, or a claimable one) the INSERT runs: it wins
		// on a free key; on a taken one, ON CONFLICT locks the record's latest version and
		// replaces it only if the condition holds there. If not, held reads the record
		// that refused it: FOR SHARE makes that read follow the row to the version the
		// upsert judged (a plain read would see the snapshot, claimable, which predates
		// it). Only a record that did not exist in the snapshot at all (created, or
		// deleted and created again, by a claim that committed while this one waited) is
		// not found: the statement returns no row, and the caller sends the claim again.
		// The answer is one row at most (the key is unique): the claim's, or the refusing
		// record's.
		claim: fmt.Sprintf(`WITH refused AS (
	SELECT `+columns+` FROM %[1]s AS r
	WHERE id = $1::text AND (`+claimable+`) IS NOT TRUE AND `+snapshotAnswers+`
), claim AS (
	INSERT INTO %[1]s AS r (`+columns+`)
	SELECT $1::text, $2::text, $3::timestamptz, $4::timestamptz, $5::text, $6::bytea, $7::text, $8::text, $9::text, $10::integer, $12::bigint
	WHERE NOT EXISTS (SELECT FROM refused)
	ON CONFLICT (id) DO UPDATE SET
		status = excluded.status, expires_at = excluded.expires_at,
		lease_expires_at = excluded.lease_expires_at, validation = excluded.validation,
		data = excluded.data, encoding = excluded.encoding, lease_token = excluded.lease_token,
		checkpoint = excluded.checkpoint, version = excluded.version,
		checkpoint_seq = excluded.checkpoint_seq
	WHERE `+claimable+`
	RETURNING 1
), held AS (
	SELECT `+columns+` FROM %[1]s
	WHERE id = $1::text AND NOT EXISTS (SELECT FROM refused) AND NOT EXISTS (SELECT FROM claim)
	FOR SHARE
)
SELECT true, `+noRecord+` FROM claim
UNION ALL SELECT false, * FROM refused
UNION ALL SELECT false, * FROM held`, t),

		// The claim statement without refused (see Store.claimSQL): the upsert judges every
		// record on its latest version, locking it even when it refuses, and held reads
		// the record that refused it, FOR SHARE, as above. It answers with one row, whose
		// record columns are NULL when the refusing record was out of its sight.
		claimLocking: fmt.Sprintf(`WITH claim AS (
	INSERT INTO %[1]s AS r (`+columns+`)
	VALUES ($1::text, $2::text, $3::timestamptz, $4::timestamptz, $5::text, $6::bytea, $7::text, $8::text, $9::text, $10::integer, $12::bigint)
	ON CONFLICT (id) DO UPDATE SET
		status = excluded.status, expires_at = excluded.expires_at,
		lease_expires_at = excluded.lease_expires_at, validation = excluded.validation,
		data = excluded.data, encoding = excluded.encoding, lease_token = excluded.lease_token,
		checkpoint = excluded.checkpoint, version = excluded.version,
		checkpoint_seq = excluded.checkpoint_seq
	WHERE `+claimable+`
	RETURNING 1
), held AS (
	SELECT `+columns+` FROM %[1]s
	WHERE id = $1::text AND NOT EXISTS (SELECT FROM claim)
	FOR SHARE
)
SELECT EXISTS (SELECT FROM claim), held.* FROM (VALUES (1)) AS one LEFT JOIN held ON true`, t),

		get: fmt.Sprintf(`SELECT `+columns+` FROM %s WHERE id = $1::text`, t),

		// Store.Complete's UPDATE without attached writes: completeOwned's done alone, an
		// Exec whose row count answers. Only when it completes nothing does tokenStatus
		// read the record under the token, in a statement of its own, to tell a resend of
		// a completion that committed (completed under the token) from a lost lease (no
		// record under it). The UPDATE waited for any writer of the row and found it not in
		// progress under the token, and a token once replaced never comes back, so the
		// read's later snapshot tells the same. It reads FOR SHARE all the same: the lock
		// gives the statement a transaction id, so its commit waits for what the session's
		// commits wait for (a WAL flush, a synchronous standby) after the completion it
		// reports, which a resend must not report before that completion is durable
		// (review 30: a first attempt whose wait for the standby was cancelled).
		complete: fmt.Sprintf(`UPDATE %s SET status = $2::text, expires_at = $3::timestamptz,
	lease_expires_at = NULL, validation = $4::text, data = $5::bytea, encoding = $6::text,
	version = $7::integer
WHERE id = $1::text AND lease_token = $8::text AND status = 'INPROGRESS'`, t),
		tokenStatus: fmt.Sprintf(`SELECT status FROM %s WHERE id = $1::text AND lease_token = $2::text FOR SHARE`, t),

		// A completion requires the record in progress under the token, so a resend of
		// one that committed (with attached writes, a transaction) writes nothing, and no
		// completion under the token overwrites another (the guard's completion with the
		// result chosen for refused writes, met by the refused one's late first attempt);
		// held then reads the record under our token (FOR SHARE: its latest version) to
		// tell that resend, which finds it completed, from a lost lease, which finds
		// nothing.
		completeOwned: fmt.Sprintf(`WITH done AS (
	UPDATE %[1]s SET status = $2::text, expires_at = $3::timestamptz,
		lease_expires_at = NULL, validation = $4::text, data = $5::bytea, encoding = $6::text,
		version = $7::integer
	WHERE id = $1::text AND lease_token = $8::text AND status = 'INPROGRESS'
	RETURNING 1
), held AS (
	SELECT status FROM %[1]s
	WHERE id = $1::text AND lease_token = $8::text AND NOT EXISTS (SELECT FROM done)
	FOR SHARE
)
SELECT EXISTS (SELECT FROM done), held.status FROM (VALUES (1)) AS one LEFT JOIN held ON true`, t),

		// Whether the transaction running it has the record completed under the token: the
		// check before COMMIT through a db without BeginTx (see Store.begin).
		ownedCheck: fmt.Sprintf(`SELECT EXISTS (SELECT FROM %s WHERE id = $1::text AND lease_token = $2::text AND status = $3::text)`, t),

		// The record is kept as a tombstone, never deleted: its lease ended ($3, the Unix
		// epoch) and its token replaced ($4), so the next claim takes it over at once (with
		// its checkpoint, if any), no late write of the releasing owner lands, and a late
		// attempt of its own claim is refused.
		release: fmt.Sprintf(`UPDATE %s SET lease_expires_at = $3::timestamptz, lease_token = $4::text
WHERE id = $1::text AND lease_token = $2::text AND status = 'INPROGRESS'`, t),

		// GREATEST: an extension never shortens the stored lease.
		extend: fmt.Sprintf(`UPDATE %s SET lease_expires_at = GREATEST(lease_expires_at, $3::timestamptz)
WHERE id = $1::text AND lease_token = $2::text AND status = 'INPROGRESS'`, t),

		// Checkpoint number $4 only over a lower number, or over itself with the same
		// checkpoint (a resend): a late write never replaces a later checkpoint.
		checkpoint: fmt.Sprintf(`UPDATE %s SET checkpoint = $3::text, checkpoint_seq = $4::bigint
WHERE id = $1::text AND lease_token = $2::text AND status = 'INPROGRESS'
	AND (checkpoint_seq < $4::bigint
		OR (checkpoint_seq = $4::bigint AND checkpoint IS NOT DISTINCT FROM $3::text))`, t),
	}
}
