package pgstore

import (
	"fmt"
	"strings"
)

// batchStatements holds the SQL of the batch methods for one table. A batch travels as one
// array parameter per column, unnested into rows with their position (n, from 1), so the
// statement text is the same for every batch size and PostgreSQL plans it once per
// connection in pgx's default mode. Every statement locks the rows it touches in key
// order, as every other batch statement does, so that two batches over the same keys in
// different orders wait for one another instead of deadlocking.
type batchStatements struct {
	claim, complete, completeOwned, release string
	// claimLocking is the claim without refused: see Store.claimSQL.
	claimLocking string
}

// completeInput unnests a batch of completions: $1 to $8 are the arrays of
// completeArgs's parameters, in their order.
const completeInput = `input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::bytea[],
		$6::text[], $7::integer[], $8::text[])
		WITH ORDINALITY AS i(id, status, expires_at, validation, data, encoding, version, lease_token, n)
)`

// batchClaimable is the claim condition of the batch claim on the record r, for the claim
// whose values are the row named claim (excluded in the upsert, the input row before it).
func batchClaimable(claim string) string {
	return strings.NewReplacer("$c", claim).Replace(`r.expires_at <= $12::timestamptz
		OR (r.status = 'INPROGRESS' AND r.lease_expires_at <= $12::timestamptz
			AND r.lease_token IS DISTINCT FROM $13::text || coalesce($c.lease_token, '')
			AND CASE WHEN coalesce(r.checkpoint, '') = '' THEN $c.checkpoint IS NULL
				ELSE r.checkpoint = $c.checkpoint AND r.checkpoint_seq = $c.checkpoint_seq
					AND coalesce(r.validation, '') = coalesce($c.validation, '') END)`)
}

func newBatchStatements(table string) batchStatements {
	t := quote(table)
	// locked locks the rows of the input's keys under their tokens, in key order, each
	// found by its key (a lookup per key, whatever the planner thinks of the table's
	// size), and names them by their row version (tid): the newest one, when an update
	// of the owner's own (an extension, an earlier attempt of the same statement)
	// changed the row while locked waited. That version is invisible to the statement's
	// snapshot, so seen names, for each key locked, the version the snapshot sees (a
	// lookup per key: LIMIT 1 keeps the planner from turning it into a join over the
	// table). The UPDATE reads both versions directly, so no statement scans the table:
	// it meets the row by the version it sees, and PostgreSQL rechecks its WHERE (key,
	// token, and tid, hence the newest version's tid in the list) on the newest version
	// (EvalPlanQual), as it does for the single statements. Reading only the locked
	// version, the UPDATE would find nothing and answer ErrLeaseLost to the owner.
	lockedOwned := fmt.Sprintf(`locked AS (
	SELECT r.* FROM (SELECT id, lease_token FROM input ORDER BY id) AS i
	CROSS JOIN LATERAL (SELECT ctid AS tid, id, status FROM %[1]s AS r
		WHERE r.id = i.id AND r.lease_token = i.lease_token FOR UPDATE) AS r
), seen AS (
	SELECT r.tid FROM locked CROSS JOIN LATERAL (SELECT ctid AS tid FROM %[1]s AS r WHERE r.id = locked.id LIMIT 1) AS r
)`, t)
	return batchStatements{
		// Store.Claim's statement for many records. As there, refused holds the input
		// rows whose record, read in the statement's snapshot without a lock, refuses
		// them (the condition is the single claim's, on the input row's values; its
		// released token is $13 || its token; LIMIT 1 keeps the planner from turning the
		// lookup per key into a join over the table), and returns that record: they insert
		// nothing and lock nothing. Where the session's commits wait for a synchronous
		// standby (snapshotAnswers) refused holds no row, and every key locks. The other
		// rows go through the upsert, whose WHERE is the same condition with the claim's
		// values taken from excluded, in key order, and held reads the records that
		// refused them, FOR SHARE, as the single claim does. Each input row comes back
		// once, in input order, with whether it was claimed and the refusing record, if
		// the statement could see it.
		claim: fmt.Sprintf(`WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[],
		$6::bytea[], $7::text[], $8::text[], $9::text[], $10::integer[], $11::bigint[])
		WITH ORDINALITY AS i(id, status, expires_at, lease_expires_at, validation, data, encoding,
			lease_token, checkpoint, version, checkpoint_seq, n)
), refused AS (
	SELECT r.* FROM input AS i
	CROSS JOIN LATERAL (SELECT `+columns+` FROM %[1]s AS r WHERE r.id = i.id LIMIT 1) AS r
	WHERE (`+batchClaimable("i")+`) IS NOT TRUE AND `+snapshotAnswers+`
), claim AS (
	INSERT INTO %[1]s AS r (`+columns+`)
	SELECT `+columns+` FROM input WHERE id NOT IN (SELECT id FROM refused) ORDER BY id
	ON CONFLICT (id) DO UPDATE SET
		status = excluded.status, expires_at = excluded.expires_at,
		lease_expires_at = excluded.lease_expires_at, validation = excluded.validation,
		data = excluded.data, encoding = excluded.encoding, lease_token = excluded.lease_token,
		checkpoint = excluded.checkpoint, version = excluded.version,
		checkpoint_seq = excluded.checkpoint_seq
	WHERE `+batchClaimable("excluded")+`
	RETURNING r.id
), held AS (
	SELECT h.* FROM (SELECT id FROM input
		WHERE id NOT IN (SELECT id FROM claim) AND id NOT IN (SELECT id FROM refused) ORDER BY id) AS i
	CROSS JOIN LATERAL (SELECT `+columns+` FROM %[1]s AS r WHERE r.id = i.id FOR SHARE) AS h
)
SELECT input.n, claim.id IS NOT NULL, h.*
FROM input LEFT JOIN claim ON claim.id = input.id
LEFT JOIN (SELECT * FROM refused UNION ALL SELECT * FROM held) AS h ON h.id = input.id
ORDER BY input.n`, t),

		// The batch claim without refused, for the modes that parse and plan every
		// statement (see Store.claimSQL): every key goes through the upsert and held.
		claimLocking: fmt.Sprintf(`WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[],
		$6::bytea[], $7::text[], $8::text[], $9::text[], $10::integer[], $11::bigint[])
		WITH ORDINALITY AS i(id, status, expires_at, lease_expires_at, validation, data, encoding,
			lease_token, checkpoint, version, checkpoint_seq, n)
), claim AS (
	INSERT INTO %[1]s AS r (`+columns+`)
	SELECT `+columns+` FROM input ORDER BY id
	ON CONFLICT (id) DO UPDATE SET
		status = excluded.status, expires_at = excluded.expires_at,
		lease_expires_at = excluded.lease_expires_at, validation = excluded.validation,
		data = excluded.data, encoding = excluded.encoding, lease_token = excluded.lease_token,
		checkpoint = excluded.checkpoint, version = excluded.version,
		checkpoint_seq = excluded.checkpoint_seq
	WHERE `+batchClaimable("excluded")+`
	RETURNING r.id
), held AS (
	SELECT h.* FROM (SELECT id FROM input WHERE id NOT IN (SELECT id FROM claim) ORDER BY id) AS i
	CROSS JOIN LATERAL (SELECT `+columns+` FROM %[1]s AS r WHERE r.id = i.id FOR SHARE) AS h
)
SELECT input.n, claim.id IS NOT NULL, held.*
FROM input LEFT JOIN claim ON claim.id = input.id LEFT JOIN held ON held.id = input.id
ORDER BY input.n`, t),

		// Store.Complete's statement for many records, conditional on each one's token and
		// on the record being in progress. locked takes the rows in key order before the
		// UPDATE changes them. The input rows that come back are those completed, and
		// those whose record under the token is completed already (a resend), which are
		// left as they are, as Complete leaves them: no completion overwrites another.
		complete: fmt.Sprintf(`WITH `+completeInput+`, `+lockedOwned+`, done AS (
	UPDATE %[1]s AS r SET status = input.status, expires_at = input.expires_at,
		lease_expires_at = NULL, validation = input.validation, data = input.data,
		encoding = input.encoding, version = input.version
	FROM input
	WHERE r.ctid = ANY (ARRAY(SELECT tid FROM locked UNION ALL SELECT tid FROM seen)) AND r.id = input.id
		AND r.lease_token = input.lease_token AND r.status = 'INPROGRESS'
	RETURNING r.id
)
SELECT input.n
FROM input LEFT JOIN done ON done.id = input.id LEFT JOIN locked ON locked.id = input.id
WHERE done.id IS NOT NULL OR locked.status <> 'INPROGRESS'`, t),

		// The completeOwned statement for many records (completions with attached writes):
		// also conditional on the record being in progress, and each input row comes back
		// with whether it was completed and, if not, the status of the record under its
		// token (a resend finds it completed; a lost lease finds none).
		completeOwned: fmt.Sprintf(`WITH `+completeInput+`, `+lockedOwned+`, done AS (
	UPDATE %[1]s AS r SET status = input.status, expires_at = input.expires_at,
		lease_expires_at = NULL, validation = input.validation, data = input.data,
		encoding = input.encoding, version = input.version
	FROM input
	WHERE r.ctid = ANY (ARRAY(SELECT tid FROM locked UNION ALL SELECT tid FROM seen)) AND r.id = input.id
		AND r.lease_token = input.lease_token AND r.status = 'INPROGRESS'
	RETURNING r.id
)
SELECT input.n, done.id IS NOT NULL, locked.status
FROM input LEFT JOIN done ON done.id = input.id LEFT JOIN locked ON locked.id = input.id
ORDER BY input.n`, t),

		// Store.Release's statement for many keys ($1) and tokens ($2), at $3, the tombstone's
		// token $4 || the token.
		release: fmt.Sprintf(`WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(id, lease_token, n)
), `+lockedOwned+`
UPDATE %[1]s AS r SET lease_expires_at = $3::timestamptz, lease_token = $4::text || input.lease_token
FROM input
WHERE r.ctid = ANY (ARRAY(SELECT tid FROM locked UNION ALL SELECT tid FROM seen)) AND r.id = input.id
	AND r.lease_token = input.lease_token AND r.status = 'INPROGRESS'
RETURNING input.n`, t),
	}
}
