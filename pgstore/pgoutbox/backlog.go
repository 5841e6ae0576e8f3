package pgoutbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backlog is what an outbox table has not published yet: how many events, and the oldest.
type Backlog struct {
	// Count is how many events are unpublished.
	Count int64
	// Lag is the oldest unpublished event's age, by the database clock from its commit,
	// as [Relay.Lag] measures it; 0 when Count is 0.
	Lag time.Duration
	// Oldest is the oldest unpublished event, nil when Count is 0.
	Oldest *Pending
}

// Pending is an unpublished event as an operator needs to see it. It heads its ordering
// key: while a broker refuses it, the key's later events wait, and Attempts and LastError
// say why.
type Pending struct {
	ID          string
	OrderingKey string
	Destination string
	Type        string
	// Attempts counts the publishes that failed; LastError is the last one's error.
	Attempts  int
	LastError string
	// CommittedAt is when its transaction committed, by the database clock.
	CommittedAt time.Time
}

// Querier runs a query that returns one row; *pgxpool.Pool, *pgx.Conn and pgx.Tx have
// it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadBacklog returns the backlog of the outbox table (see pgstore.Store.OutboxTable)
// through db, in one statement, so the count and the oldest event are of one snapshot.
// The count reads every unpublished row's entry of the outbox's partial index: an
// operator's question, not a metric to poll (poll [Relay.Lag], which reads one row).
func ReadBacklog(ctx context.Context, db Querier, table string) (Backlog, error) {
	if table == "" {
		return Backlog{}, invalid("ReadBacklog", "table name must not be empty")
	}
	var (
		b      Backlog
		us     *int64
		p      Pending
		id     *string
		commit *time.Time
	)
	err := db.QueryRow(ctx, backlogStatement(pgx.Identifier(splitName(table)).Sanitize())).
		Scan(&b.Count, &us, &id, &p.OrderingKey, &p.Destination, &p.Type, &p.Attempts, &p.LastError, &commit)
	if err != nil {
		return Backlog{}, fmt.Errorf("pgoutbox: backlog: %w", err)
	}
	if id != nil {
		p.ID, p.CommittedAt = *id, *commit
		b.Oldest = &p
		b.Lag = time.Duration(*us) * time.Microsecond
	}
	return b, nil
}

// backlogStatement counts the unpublished rows of table (quoted) and reads the oldest,
// whose age is the lag statement's.
func backlogStatement(table string) string {
	return fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s WHERE published_at IS NULL),
	o.age, o.id, coalesce(o.ordering_key, ''), coalesce(o.destination, ''), coalesce(o.type, ''),
	coalesce(o.attempts, 0), coalesce(o.last_error, ''), o.committed_at
FROM (SELECT 1) AS one LEFT JOIN LATERAL (
	SELECT `+ageMicros+` AS age, id, ordering_key, destination, type, attempts, last_error, committed_at
	FROM %[1]s WHERE published_at IS NULL ORDER BY seq LIMIT 1) AS o ON true`, table)
}
