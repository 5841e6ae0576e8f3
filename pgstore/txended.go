package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// TxEndedError reports an attached write (see [Attach]) that ended the completion's
// transaction itself: a COMMIT or ROLLBACK statement, or a transaction begun and ended on
// tx.Conn(), whose BEGIN the server ignores and whose COMMIT or ROLLBACK ends the store's
// transaction. The store runs no write after it, and reads the record back to learn what
// the transaction left: see [Attach] for the errors it then returns.
type TxEndedError struct {
	// Index is the write's position among the attached writes, from 0, or -1 when the store
	// found the transaction ended only at its COMMIT (a write ended it and began another,
	// which the store then rolled back).
	Index int
	// Err is the write's own error, if it returned one.
	Err error
	// committed is whether the record read back was completed under the completion's token.
	committed bool
}

// Error names the write and says what committed.
func (e *TxEndedError) Error() string {
	who := "an attached write"
	if e.Index >= 0 {
		who = fmt.Sprintf("attached write %d", e.Index)
	}
	msg := "pgstore: " + who + " ended the completion's transaction"
	if e.committed {
		msg += " (the completion committed with it; no write after it ran)"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the write's own error, if any.
func (e *TxEndedError) Unwrap() error { return e.Err }

// txBeginner is what *pgxpool.Pool and *pgx.Conn have beyond [DB]: a BEGIN with options,
// which lets the store check its transaction in the COMMIT's own round trip.
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// begin opens the transaction that completes rec. Through a db that has BeginTx, the
// transaction's COMMIT is sent with a check before it (see commitCheck), in the same
// round trip, and checked is true; otherwise the caller checks with the ownedCheck
// statement before COMMIT. Where pgx prepares statements (its default mode), the check is
// a statement prepared on the connection once, the first time, in the transaction (see
// Store.prepares).
func (s *Store) begin(ctx context.Context, rec *idemstore.Record) (tx pgx.Tx, checked bool, err error) {
	b, ok := s.db.(txBeginner)
	if !ok {
		tx, err = s.db.Begin(ctx)
		return tx, false, err
	}
	prepared := s.prepares()
	tx, err = b.BeginTx(ctx, pgx.TxOptions{CommitQuery: s.commitCheck(rec, prepared) + "; COMMIT"})
	if err != nil || !prepared {
		return tx, true, err
	}
	// Free once the connection has it: pgx keeps the statements it prepared by name.
	if _, err := tx.Conn().Prepare(ctx, s.sql.commitCheckName, s.sql.commitCheck); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, false, err
	}
	return tx, true, nil
}

// prepares reports whether the store's db prepares statements on its connections: a
// *pgxpool.Pool or *pgx.Conn (or a wrapper with their Config method) in pgx's default
// mode, QueryExecModeCacheStatement. It is decided on the first call: a pool's
// configuration does not change.
func (s *Store) prepares() bool {
	s.modeOnce.Do(func() {
		switch d := s.db.(type) {
		case interface{ Config() *pgxpool.Config }:
			s.prepared = d.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
		case interface{ Config() *pgx.ConnConfig }:
			s.prepared = d.Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
		}
	})
	return s.prepared
}

// commitCheckMarker is in the message of the error commitCheck raises.
const commitCheckMarker = "pgstore: the transaction being committed has not completed the record"

// commitCheck returns a statement that fails, putting the transaction in the failed state so
// that the COMMIT after it in the same simple-protocol message is skipped, unless rec is
// completed under its token in the transaction running it: the store's own transaction,
// not one an attached write began after ending the store's (see [TxEndedError]). The
// failure is a cast of commitCheckMarker to integer; the count keeps the planner from
// evaluating the cast before the rows are counted. The COMMIT takes no parameters, so the
// values are sent as escape-string literals (E'...'), which read the same whatever
// standard_conforming_strings says: as the arguments of the prepared check (EXECUTE) when
// prepared is true, whose plan the server keeps, else inlined in the check's text, which
// the server parses and plans each time.
func (s *Store) commitCheck(rec *idemstore.Record, prepared bool) string {
	key, token, status := s.sql.literal(rec.Key), s.sql.literal(rec.LeaseToken), s.sql.literal(string(rec.Status))
	if prepared {
		return "EXECUTE " + s.sql.commitCheckName + "(" + key + ", " + token + ", " + status + ")"
	}
	return s.sql.commitCheckPrefix + "WHERE id = " + key + " AND lease_token = " + token + " AND status = " + status + " HAVING count(*) = 0"
}

// isCommitCheck reports whether err is the failure of commitCheck.
func isCommitCheck(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02" && strings.Contains(pe.Message, commitCheckMarker)
}

// ownedCheck is the check of commitCheck as a statement of its own, for a db without
// BeginTx: it costs a round trip before COMMIT.
func (s *Store) ownedCheck(ctx context.Context, tx pgx.Tx, rec *idemstore.Record) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, s.sql.ownedCheck, rec.Key, rec.LeaseToken, string(rec.Status)).Scan(&ok)
	return ok, err
}

// ended returns the error for a completion whose transaction e's write ended, once the
// transaction is closed. What committed is not the store's to guess, so it reads the record
// back: still in progress under rec's token, the completion (and every write before the end)
// rolled back, and the error wraps [idemstore.ErrNotCommitted]; completed under rec's
// token, it committed, together with the writes before the end, but the writes after it
// never ran, so the error is neither a success nor a verdict (a resend finds the completion
// committed, as [Store.Complete] promises); held by another token, or absent, the
// completion did not land: [idem.ErrLeaseLost]. A failed read leaves the outcome unknown:
// a plain error.
func (s *Store) ended(ctx context.Context, rec *idemstore.Record, e *TxEndedError) error {
	cur, err := s.Get(ctx, rec.Key)
	switch {
	case err != nil:
		return &idem.StoreError{Op: "complete", Err: fmt.Errorf("%w; reading the record back: %w", e, err)}
	case cur != nil && cur.LeaseToken == rec.LeaseToken && cur.Status == idemstore.StatusInProgress:
		return s.notCommitted(e)
	case cur != nil && cur.LeaseToken == rec.LeaseToken && cur.Status == rec.Status:
		e.committed = true
		return &idem.StoreError{Op: "complete", Err: e}
	default:
		return fmt.Errorf("pgstore: complete: %w: %w", idem.ErrLeaseLost, e)
	}
}
