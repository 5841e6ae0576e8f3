package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// DB is what the store needs of a connection pool: the pgx methods it calls.
// *pgxpool.Pool has them (the usual choice), and so does a single *pgx.Conn, which is not
// safe for concurrent use and so serves only one goroutine.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// claimAttempts bounds the claim's resends when the record that refused it did not exist
// when the claim began (another claim created it meanwhile), so the statement could not
// return it.
const claimAttempts = 3

// Store is the PostgreSQL [idemstore.Store]: one row per record in one table (see [Schema]),
// every state change one statement conditional on the key's state, so any number of
// functions can share the table and a key's handler still runs at most once. It is safe
// for concurrent use when db is (a *pgxpool.Pool is).
//
// Statements per operation:
//
//   - claim: one, whether it wins, replays or meets a key in progress (two in the rare
//     race where the refusing record was created while the claim waited);
//   - completion: one (two when it completes nothing: a resend, a lost lease); with
//     attached writes ([Attach]) one plus BEGIN, COMMIT and the writes' own statements
//     (and, through a db without BeginTx, the check that otherwise travels with the
//     COMMIT);
//   - release, extend, checkpoint, get: one each;
//   - batches ([Store.ClaimMany], [Store.CompleteMany], [Store.ReleaseMany]): one statement
//     for the whole batch; [Store.CompleteManyAttached]: one transaction.
type Store struct {
	db    DB
	table string
	cfg   config
	sql   statements
	batch batchStatements

	modeOnce sync.Once // sets prepared
	prepared bool      // see Store.prepares

	claimOnce      sync.Once // sets claimText and claimBatchText
	claimText      string    // see Store.claimSQL
	claimBatchText string    // see Store.claimSQL
}

// New returns a Store that keeps records in table (see [Schema]; "schema.name" is
// accepted) through db, configured by opts. It returns an error wrapping
// [idem.ErrInvalidOption] for a nil db, an empty table name or a nil option.
func New(db DB, table string, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: pgstore: New: db must not be nil", idem.ErrInvalidOption)
	}
	if table == "" {
		return nil, fmt.Errorf("%w: pgstore: New: table name must not be empty", idem.ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, table: table, cfg: cfg, sql: newStatements(table),
		batch: newBatchStatements(table)}, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// Claim implements [idemstore.Store] with one statement, an INSERT ... ON CONFLICT DO UPDATE
// that replaces an existing record only when it is expired, or in progress with its lease
// ended and not the tombstone of the release of rec's own token (see [Store.Release]),
// with no checkpoint where rec carries none or the checkpoint rec carries, with its number,
// for a request of rec's fingerprint. Times are compared at now, the caller's clock, as
// with every store; stored ends are rounded up and now down to PostgreSQL's microseconds,
// so a record is never taken before its end. What it returns:
//
//   - a claim that wins: no previous record (PostgreSQL before 18 cannot return a row's
//     old values from an upsert; the guard does not use them);
//   - a refused claim: the record that refused it, from the same statement; in pgx's
//     default mode without a row lock when the statement's snapshot holds it refusing
//     already, unless the session's commits wait for a synchronous standby or the store
//     has [WithLockingClaims] (see the package documentation's Durability);
//   - a refusing record that does not decode: an error wrapping [idem.ErrIncompatibleRecord].
func (s *Store) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	args := []any{rec.Key, string(rec.Status), end(rec.Expires), end(rec.LeaseExpires),
		text(rec.Fingerprint), rec.Data, text(rec.Encoding), text(rec.LeaseToken),
		text(rec.Checkpoint), rec.Version, at(now), rec.CheckpointSeq, idemstore.ReleasedToken(rec.LeaseToken)}
	for range claimAttempts {
		var claimed bool
		var r row
		err := s.db.QueryRow(ctx, s.claimSQL(), args...).Scan(append([]any{&claimed}, r.dest()...)...)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // created by a claim that committed while ours waited: claim again
		}
		if err != nil {
			return nil, false, s.fail("claim", err)
		}
		if claimed {
			return nil, true, nil
		}
		if r.id == nil {
			continue // created by a claim that committed while ours waited: claim again
		}
		prev, err := r.record()
		if err != nil {
			return nil, false, err
		}
		return prev, false, nil
	}
	return nil, false, &idem.StoreError{Op: "claim", Err: fmt.Errorf("pgstore: claim: the conflicting record was out of the statement's sight %d times in a row", claimAttempts)}
}

// claimSQL returns the claim statement for the store's db, and sets the batch claim's
// (claimBatchText) alike. It is the one that first reads the record in the statement's
// snapshot without a lock (statements.claim), so that a replay or a refusal takes no row
// lock, unless the store has [WithLockingClaims] or db is known to parse and plan every
// statement it sends: a pool, connection or transaction (or a wrapper with their Config
// or Conn method) in a pgx mode other than QueryExecModeCacheStatement. There that read
// costs more to parse and plan, on every call, than the row lock it saves, and the claim is
// the upsert alone (statements.claimLocking). It is decided on the first call. The
// snapshot read answers only where a session's commits wait for no synchronous standby
// (snapshotAnswers, judged by the server on each statement); elsewhere that statement
// locks as claimLocking does.
func (s *Store) claimSQL() string {
	s.claimOnce.Do(func() {
		s.claimText, s.claimBatchText = s.sql.claim, s.batch.claim
		mode, known := execMode(s.db)
		if s.cfg.lockingClaims || known && mode != pgx.QueryExecModeCacheStatement {
			s.claimText, s.claimBatchText = s.sql.claimLocking, s.batch.claimLocking
		}
	})
	return s.claimText
}

// execMode returns the default query exec mode of db, and whether it is known: db is a
// pool, a connection or a transaction, or a wrapper with their Config or Conn method.
func execMode(db DB) (pgx.QueryExecMode, bool) {
	switch d := db.(type) {
	case interface{ Config() *pgxpool.Config }:
		return d.Config().ConnConfig.DefaultQueryExecMode, true
	case interface{ Config() *pgx.ConnConfig }:
		return d.Config().DefaultQueryExecMode, true
	case interface{ Conn() *pgx.Conn }:
		return d.Conn().Config().DefaultQueryExecMode, true
	}
	return 0, false
}

// Get implements [idemstore.Store] with one SELECT by key. It returns nil and no error when
// there is no record, and an error wrapping [idem.ErrIncompatibleRecord] for one that does
// not decode. It does not interpret expiry.
func (s *Store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	var r row
	err := s.db.QueryRow(ctx, s.sql.get, key).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail("get", err)
	}
	return r.record()
}

// Complete implements [idemstore.Store]. Without attached writes it is one UPDATE of the record
// to rec's status, result and expiry, conditional on the lease token and on the record
// being in progress: a worker whose lease was taken over gets [idem.ErrLeaseLost] and
// never overwrites the new owner's record, and a completion that finds the record
// completed under its token already (a resend) returns nil and writes nothing (these two
// read the record after the UPDATE, a second statement). With
// attached writes see [Attach]: one transaction holds the conditional UPDATE, then the
// writes, then COMMIT. The checkpoint is kept; the lease end is cleared.
func (s *Store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if rec.LeaseToken == "" {
		return errors.New("pgstore: complete: record has no lease token")
	}
	if len(attached) > 0 {
		return s.completeWith(ctx, rec, attached)
	}
	tag, err := s.db.Exec(ctx, s.sql.complete, completeArgs(rec)...)
	if err != nil {
		return s.fail("complete", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var status *string
	err = s.db.QueryRow(ctx, s.sql.tokenStatus, rec.Key, rec.LeaseToken).Scan(&status)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.fail("complete", err)
	}
	return completedOrLost(false, status)
}

// completedOrLost maps the answer of the completeOwned statement: nil when it completed
// the record or found it completed under the token already (a resend: nothing is written
// twice), else [idem.ErrLeaseLost].
func completedOrLost(done bool, status *string) error {
	if done || (status != nil && *status != string(idemstore.StatusInProgress)) {
		return nil
	}
	return fmt.Errorf("pgstore: complete: %w", idem.ErrLeaseLost)
}

// completeArgs returns the parameters of the complete and completeOwned statements.
func completeArgs(rec *idemstore.Record) []any {
	return []any{rec.Key, string(rec.Status), end(rec.Expires), text(rec.Fingerprint),
		rec.Data, text(rec.Encoding), rec.Version, rec.LeaseToken}
}

// Release implements [idemstore.Store] with one UPDATE conditional on the lease token and on
// the record being in progress, which keeps the record as a tombstone: its lease ended at
// now and its token replaced by [idemstore.ReleasedToken]. A claim made from then on takes
// it over at once, resuming from its checkpoint if it has one; no late completion of ours
// lands on it, and a claim sent before the release that the network delivers after it
// (ours, or an owner's that took the key over and released it in between) is refused
// rather than hold the key again. Tombstones
// stay until their expiry, as completed records do (see [Store.DeleteExpired]).
func (s *Store) Release(ctx context.Context, key, token string, now time.Time) error {
	// Rounded down, as a claim's now is: a claim at or after now takes the tombstone over.
	tag, err := s.db.Exec(ctx, s.sql.release, key, token, at(now), idemstore.ReleasedToken(token))
	return s.owned("release", tag, err)
}

// Extend implements [idemstore.Store] with one UPDATE of the lease end, conditional on the
// lease token and on the record being in progress. It never shortens the stored lease: an
// end before the stored one leaves it as it is.
func (s *Store) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	tag, err := s.db.Exec(ctx, s.sql.extend, key, token, end(leaseExpires))
	return s.owned("extend", tag, err)
}

// SetCheckpoint implements [idemstore.Store] with one UPDATE of the checkpoint and its
// number, conditional on the lease token, on the record being in progress, and on the
// stored number being below seq, or equal to it with the same checkpoint (a resend): a
// late write of an earlier checkpoint changes nothing and yields [idem.ErrLeaseLost].
func (s *Store) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	tag, err := s.db.Exec(ctx, s.sql.checkpoint, key, token, text(checkpoint), seq)
	return s.owned("checkpoint", tag, err)
}

// owned maps the outcome of a statement conditional on the lease token: no row changed
// means another owner holds the key, or nobody does.
func (s *Store) owned(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return s.fail(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: %s: %w", op, idem.ErrLeaseLost)
	}
	return nil
}

// fail wraps a driver error of op in an [*idem.StoreError]; errors.As still reaches the
// driver's error (a *pgconn.PgError for the server's).
func (s *Store) fail(op string, err error) error {
	return &idem.StoreError{Op: op, Err: err}
}
