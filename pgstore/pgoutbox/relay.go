package pgoutbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
)

// Relay publishes an outbox table's committed events. It is safe for concurrent use, and
// any number of relays (goroutines, processes, hosts) may run over one table.
type Relay struct {
	pool  *pgxpool.Pool
	table string
	pub   outbox.Publisher
	cfg   config
	sql   statements
}

// New returns a relay of the outbox table (see pgstore.Store.OutboxTable) through pool,
// publishing with pub. It returns an error wrapping idem.ErrInvalidOption for a nil pool
// or publisher, an empty table name, or a bad option.
func New(pool *pgxpool.Pool, table string, pub outbox.Publisher, opts ...Option) (*Relay, error) {
	switch {
	case pool == nil:
		return nil, invalid("New", "pool must not be nil")
	case pub == nil:
		return nil, invalid("New", "publisher must not be nil")
	case table == "":
		return nil, invalid("New", "table name must not be empty")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Relay{pool: pool, table: table, pub: pub, cfg: cfg, sql: newStatements(table)}, nil
}

// Pass is what one pass of a relay did: the messages it published and those the publisher
// reported failed (they are published again by a later pass).
type Pass struct {
	Published, Failed int
	// Full is true when more may be waiting that the next pass can publish at once: the
	// pass published something, and took a batch's worth of ordering keys, or as many
	// rows as it could of a key whose messages it all published.
	Full bool
}

// row is an unpublished outbox row.
type row struct {
	seq int64
	msg outbox.Message
}

// RelayOnce runs one pass: it takes the ordering keys of up to [WithBatchSize]
// unpublished events that are the oldest of their key, among the keys no other relay
// holds; reads up to the batch size of those keys' oldest unpublished events, as many of
// each key's as of any other's (at least one); publishes them in order per ordering key,
// marks the published ones and commits. A key whose oldest event the broker refuses
// stops there, and takes no more of a later pass than its oldest event: it never keeps
// the other keys out. [Relay.Run] calls it; a scheduled function can too. The
// publisher's failures are counted on their rows (attempts, last_error, the error's text
// made storable), in a savepoint: a failure to store them goes to [Hooks.OnError] and
// never undoes the marks. An error means the marks did not commit, what was published
// being published again, except an error of the COMMIT itself whose answer was lost (the
// connection broke): the marks may then have committed.
func (r *Relay) RelayOnce(ctx context.Context) (Pass, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return Pass{}, fmt.Errorf("pgoutbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := r.take(ctx, tx)
	if err != nil {
		return Pass{}, err
	}
	if len(rows) == 0 {
		return Pass{}, nil
	}
	limit := max(1, r.cfg.batchSize/len(rows))
	if rows, err = r.heads(ctx, tx, rows, limit); err != nil {
		return Pass{}, err
	}
	published, failed := r.publish(ctx, rows)
	p := Pass{Published: len(published), Failed: len(failed)}
	p.Full = p.Published > 0 && (len(rows) >= r.cfg.batchSize || moreWaiting(rows, failed, limit))
	// Mark even when ctx ended during the publish: what the broker took should not be
	// sent again without need.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.markTimeout)
	defer cancel()
	if len(published) > 0 {
		if _, err := tx.Exec(mctx, r.sql.mark, published); err != nil {
			return Pass{}, fmt.Errorf("pgoutbox: mark published: %w", err)
		}
	}
	if len(failed) > 0 {
		if err := r.recordFailures(mctx, tx, failed); err != nil {
			// Bookkeeping only: it must not undo the marks of what the broker took.
			r.onError(err)
		}
	}
	if err := tx.Commit(mctx); err != nil {
		return Pass{}, fmt.Errorf("pgoutbox: commit: %w", err)
	}
	if h := r.cfg.hooks.OnPass; h != nil {
		h(p)
	}
	return p, nil
}

// recordFailures counts a failed attempt on each row of failed and stores its error's
// text, made storable ([errorText]), in a savepoint: should the statement fail all the
// same, the savepoint rolls back alone, and the pass's marks still commit.
func (r *Relay) recordFailures(ctx context.Context, tx pgx.Tx, failed map[int64]error) error {
	seqs, msgs := make([]int64, 0, len(failed)), make([]string, 0, len(failed))
	for seq, err := range failed {
		seqs, msgs = append(seqs, seq), append(msgs, errorText(err))
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgoutbox: record failures: %w", err)
	}
	if _, err := sp.Exec(ctx, r.sql.fail, seqs, msgs); err != nil {
		_ = sp.Rollback(ctx)
		return fmt.Errorf("pgoutbox: record failures: %w", err)
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("pgoutbox: record failures: %w", err)
	}
	return nil
}

// maxErrorText is the most bytes of a publish error's text that last_error keeps.
const maxErrorText = 2048

// errorText returns err's text as a text column can hold it: valid UTF-8 (an invalid
// byte becomes U+FFFD), without NUL (also U+FFFD), and at most [maxErrorText] bytes, cut
// at a character's boundary. A broker's answer may echo a message's binary bytes.
func errorText(err error) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= maxErrorText {
		return s
	}
	n := maxErrorText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// moreWaiting reports whether a key none of whose rows failed had limit rows read: it may
// have more.
func moreWaiting(rows []row, failed map[int64]error, limit int) bool {
	n, bad := map[string]int{}, map[string]bool{}
	for _, rw := range rows {
		k := rw.msg.OrderingKey
		n[k]++
		if _, ok := failed[rw.seq]; ok {
			bad[k] = true
		}
	}
	for k, c := range n {
		if c >= limit && !bad[k] {
			return true
		}
	}
	return false
}

// take locks the ordering keys of up to a batch of unpublished rows that are the oldest
// of their key, and reads those rows.
func (r *Relay) take(ctx context.Context, tx pgx.Tx) ([]row, error) {
	return r.scan(ctx, tx, "take", r.sql.take, r.cfg.batchSize)
}

// scan runs a statement that reads outbox rows.
func (r *Relay) scan(ctx context.Context, tx pgx.Tx, op, sql string, args ...any) ([]row, error) {
	q, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("pgoutbox: %s: %w", op, err)
	}
	defer q.Close()
	var out []row
	for q.Next() {
		var rw row
		m := &rw.msg
		if err := q.Scan(&rw.seq, &m.ID, &m.OrderingKey, &m.Destination, &m.Type, &m.Payload, &m.Headers, &m.StoredKey, &m.RecordedAt); err != nil {
			return nil, fmt.Errorf("pgoutbox: %s: %w", op, err)
		}
		out = append(out, rw)
	}
	if err := q.Err(); err != nil {
		return nil, fmt.Errorf("pgoutbox: %s: %w", op, err)
	}
	return out, nil
}

// heads returns the oldest unpublished rows of the ordering keys of rows, up to limit
// per key, in seq order: each key's rows from its oldest on, without gaps. The take statement
// cannot promise that: it evaluates each row's key lock as it scans, in the order of its
// plan, so a key another relay held when some of its rows were scanned, and released (its
// relay committed, or died) before others were, has only some rows taken, and publishing
// those would overtake the others. Holding every taken key's lock now, the relay reads the
// keys' rows again in a new snapshot, which sees what the previous holder committed.
func (r *Relay) heads(ctx context.Context, tx pgx.Tx, rows []row, limit int) ([]row, error) {
	seen := map[string]bool{}
	var keys []string
	for _, rw := range rows {
		if k := rw.msg.OrderingKey; !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return r.scan(ctx, tx, "heads", r.sql.heads, keys, limit)
}

// publish hands rows to the publisher in rounds of at most one message per ordering key,
// in seq order: a key's next message goes in the next round, only if its previous one was
// published. It returns the seqs published and the failures by seq.
func (r *Relay) publish(ctx context.Context, rows []row) (published []int64, failed map[int64]error) {
	queues := map[string][]row{}
	var keys []string
	for _, rw := range rows {
		k := rw.msg.OrderingKey
		if _, ok := queues[k]; !ok {
			keys = append(keys, k)
		}
		queues[k] = append(queues[k], rw)
	}
	failed = map[int64]error{}
	for len(keys) > 0 {
		round := make([]row, len(keys))
		msgs := make([]idemstore.OutboxMessage, len(keys))
		for i, k := range keys {
			round[i], msgs[i] = queues[k][0], queues[k][0].msg
		}
		errs := outcomes(r.pub.Publish(ctx, msgs), len(msgs))
		next := keys[:0]
		for i, k := range keys {
			if errs[i] != nil {
				failed[round[i].seq] = errs[i] // the key stops here: its later rows wait
				continue
			}
			published = append(published, round[i].seq)
			if queues[k] = queues[k][1:]; len(queues[k]) > 0 {
				next = append(next, k)
			}
		}
		keys = next
	}
	return published, failed
}

// errOutcomes is a publisher's answer of the wrong length.
var errOutcomes = errors.New("pgoutbox: the publisher returned a number of errors other than the number of messages")

// outcomes returns one error per message from a publisher's answer.
func outcomes(errs []error, n int) []error {
	if errs == nil {
		return make([]error, n)
	}
	if len(errs) != n {
		out := make([]error, n)
		for i := range out {
			out[i] = errOutcomes
		}
		return out
	}
	return errs
}

// Lag returns the age of the oldest unpublished event, by the database clock from its
// commit (committed_at): the outbox's lag, 0 when every event is published. Export it as
// a metric and alarm when it grows.
func (r *Relay) Lag(ctx context.Context) (time.Duration, error) {
	var us int64
	if err := r.pool.QueryRow(ctx, r.sql.lag).Scan(&us); err != nil {
		return 0, fmt.Errorf("pgoutbox: lag: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// ageMicros is the age of a row, by the database clock from its commit, in microseconds.
const ageMicros = `(extract(epoch FROM clock_timestamp() - committed_at) * 1e6)::bigint`

// cols are the columns the relay reads, in the order scan reads them.
const cols = `seq, id, ordering_key, destination, type, payload, headers, coalesce(stored_key, ''), recorded_at`

// statements holds the relay's SQL for one table.
type statements struct{ take, heads, mark, fail, lag string }

func newStatements(table string) statements {
	t := pgx.Identifier(splitName(table)).Sanitize()
	return statements{
		// Oldest first, each key's oldest unpublished row only (so a key with many rows
		// behind a refused one cannot fill the batch), skipping rows another relay has
		// locked and ordering keys another relay holds: the advisory lock is taken by the
		// filter and held to the commit. The scan passes over the rows behind each key's
		// oldest (the index on (ordering_key, seq) answers each check).
		take: fmt.Sprintf(`SELECT `+cols+`
FROM %[1]s AS o
WHERE published_at IS NULL
AND NOT EXISTS (SELECT FROM %[1]s AS b WHERE b.published_at IS NULL AND b.ordering_key = o.ordering_key AND b.seq < o.seq)
AND pg_try_advisory_xact_lock(%[2]s)
ORDER BY seq
LIMIT $1::integer
FOR UPDATE SKIP LOCKED`, t, pgstore.OutboxLockKey(table, "o.ordering_key", pgstore.OutboxRelayLock)),
		// The keys' rows again, in a new snapshot, once their locks are held: a prefix
		// of each key's unpublished rows, at most $2 of each. FOR UPDATE without SKIP
		// LOCKED: only a relay that is ending can still hold one of them.
		heads: fmt.Sprintf(`SELECT h.*
FROM unnest($1::text[]) AS k(key)
CROSS JOIN LATERAL (SELECT `+cols+`
	FROM %s
	WHERE published_at IS NULL AND ordering_key = k.key
	ORDER BY seq
	LIMIT $2::integer
	FOR UPDATE) AS h
ORDER BY h.seq`, t),
		mark: fmt.Sprintf(`UPDATE %s SET published_at = clock_timestamp() WHERE seq = ANY($1::bigint[])`, t),
		fail: fmt.Sprintf(`UPDATE %s AS o SET attempts = o.attempts + 1, last_error = f.err
FROM unnest($1::bigint[], $2::text[]) AS f(seq, err) WHERE o.seq = f.seq`, t),
		lag: fmt.Sprintf(`SELECT coalesce((SELECT `+ageMicros+` FROM %s WHERE published_at IS NULL ORDER BY seq LIMIT 1), 0)`, t),
	}
}
