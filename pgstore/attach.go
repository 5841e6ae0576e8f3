package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Write is a business write attached to a completion (see [Attach]): it runs in the
// completion's transaction, after the record was completed in it under the lease token,
// and commits with it or not at all. It must not commit or roll back tx (those calls
// return an error); a savepoint (tx.Begin) is fine. An error it returns rolls everything
// back.
type Write func(ctx context.Context, tx pgx.Tx) error

// Attach adds writes to the completion of the key whose guarded handler ctx belongs to
// (see [idem.Attach]): the PostgreSQL counterpart of dynamo.Attach. When the handler
// returns, the store opens one transaction, completes the record in it (conditional on
// the lease token and on the record being in progress), runs the writes in order with that
// transaction, and commits. The business effect and the record thus commit together or
// not at all: a crash before completion commits nothing, duplicates commit once, and a
// worker whose lease was taken over has its writes never even run (the completion finds
// no record of its token, rolls back and returns [idem.ErrLeaseLost]).
//
// A write that returns an error rolls the transaction back, and the guarded call fails
// with an [*AttachedWriteError] wrapping [idem.ErrConditionFailed] and the write's error;
// the key is released, so a retry runs again. Use it for a business condition that does
// not hold (a balance too low, a unique violation). If the connection breaks while writes
// run, the error wraps [idemstore.ErrNotCommitted] instead (and [idem.ErrStore]).
//
// Attach returns an error wrapping [idem.ErrNoLease] outside a guarded handler. It is safe
// for concurrent use.
func Attach(ctx context.Context, writes ...Write) error {
	w := make([]any, len(writes))
	for i := range writes {
		w[i] = writes[i]
	}
	return idem.Attach(ctx, w...)
}

// completeWith completes rec and runs the attached writes in one transaction. The
// completion statement goes first: it takes the record's row lock, so the writes run only
// once the lease is known to be ours, and a concurrent claim of the key waits for the
// commit.
func (s *Store) completeWith(ctx context.Context, rec *idemstore.Record, attached []any) (err error) {
	writes, err := attachedWrites(attached)
	if err != nil {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return s.fail("complete", err) // nothing sent: a resend may do it
	}
	committed := false
	defer func() {
		if !committed {
			// A rollback that fails leaves nothing committed either: the server rolls an
			// open transaction back when its connection ends.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var done bool
	var status *string
	if err := tx.QueryRow(ctx, s.sql.completeOwned, completeArgs(rec)...).Scan(&done, &status); err != nil {
		return s.notCommitted(err)
	}
	if !done {
		if status != nil && *status != string(idemstore.StatusInProgress) {
			return nil // a resend of a completion that committed: nothing commits twice
		}
		return fmt.Errorf("pgstore: complete: %w", idem.ErrLeaseLost)
	}
	for i, w := range writes {
		if err := w(ctx, ownedTx{tx}); err != nil {
			if tx.Conn().IsClosed() {
				return s.notCommitted(&AttachedWriteError{Index: i, Err: err})
			}
			return &AttachedWriteError{Index: i, Err: fmt.Errorf("%w: %w", idem.ErrConditionFailed, err)}
		}
	}
	err = tx.Commit(ctx)
	committed = true // or failed: either way a rollback has nothing left to do
	return s.commitFail(err)
}

// notCommitted reports a failure before COMMIT was sent: the transaction committed nothing.
func (s *Store) notCommitted(err error) error {
	return &idem.StoreError{Op: "complete", Err: fmt.Errorf("pgstore: complete: %w: %w", idemstore.ErrNotCommitted, err)}
}

// commitFail maps the error of COMMIT. The server refusing it (a deferred constraint, a
// serialization failure, or a transaction a write left failed while swallowing the error)
// committed nothing; any other failure (the connection broke) leaves the outcome unknown,
// and the guard reads the record to learn it.
func (s *Store) commitFail(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrTxCommitRollback), errors.As(err, &pe):
		return s.notCommitted(err)
	default:
		return s.fail("complete", err)
	}
}

// attachedWrites returns the attached writes, which must be [Write] values as [Attach]
// adds them (or plain functions of that signature).
func attachedWrites(attached []any) ([]Write, error) {
	writes := make([]Write, len(attached))
	for i, a := range attached {
		switch w := a.(type) {
		case Write:
			writes[i] = w
		case func(context.Context, pgx.Tx) error:
			writes[i] = w
		default:
			return nil, fmt.Errorf("pgstore: complete: attached write %d is %T, want pgstore.Write (use pgstore.Attach)", i, a)
		}
		if writes[i] == nil {
			return nil, fmt.Errorf("pgstore: complete: attached write %d is nil", i)
		}
	}
	return writes, nil
}

// errOwnedTx is what an attached write gets for committing or rolling back the completion's
// transaction, which the store commits itself.
var errOwnedTx = errors.New("pgstore: the completion's transaction is committed by the store; an attached write returns an error to roll it back")

// ownedTx is the completion's transaction as attached writes see it: everything but Commit
// and Rollback, which only the store may call.
type ownedTx struct{ pgx.Tx }

// Commit refuses: the store commits the completion's transaction.
func (ownedTx) Commit(context.Context) error { return errOwnedTx }

// Rollback refuses: an attached write returns an error to roll the transaction back.
func (ownedTx) Rollback(context.Context) error { return errOwnedTx }

// AttachedWriteError names the write attached to a completion (see [Attach]) that failed.
// Nothing committed, the completion included, and the guard released the key. Err wraps
// [idem.ErrConditionFailed] and the write's own error, which errors.Is and errors.As
// reach.
type AttachedWriteError struct {
	// Index is the write's position among the attached writes, from 0.
	Index int
	// Err is the cause.
	Err error
}

// Error describes the failure and names the write.
func (e *AttachedWriteError) Error() string {
	return fmt.Sprintf("pgstore: complete: attached write %d: %v", e.Index, e.Err)
}

// Unwrap returns the cause.
func (e *AttachedWriteError) Unwrap() error { return e.Err }
