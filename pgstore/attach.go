package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Write is a business write attached to a completion (see [Attach]): it runs in the
// completion's transaction, after the record was completed in it under the lease token,
// and commits with it or not at all. It must not end tx: tx.Commit and tx.Rollback return
// an error, and a COMMIT or ROLLBACK statement, or a transaction begun on tx.Conn(), is a
// misuse whose outcome [Attach] describes. A savepoint (tx.Begin) is fine. An error it
// returns rolls everything back.
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
// run, or a write's error wraps a [*pgconn.PgError] of a serialization failure (SQLSTATE
// 40001) or a deadlock (40P01), which say nothing of the business condition and may not
// recur, the error wraps [idemstore.ErrNotCommitted] instead (and [idem.ErrStore]: a
// retryable failure, which the HTTP wrappers answer 503 with Retry-After), as it does when
// a write returns nil after one of its statements failed (the transaction can then only
// roll back).
//
// A write must not end the completion's transaction: no COMMIT or ROLLBACK statement
// (END and ABORT included), and no transaction begun on tx.Conn(), as a library that takes
// a *pgx.Conn does: the server ignores its BEGIN inside the completion's transaction, and
// its COMMIT or ROLLBACK ends the completion's. The store checks the connection's
// transaction status after each write and, with its COMMIT, that the transaction it
// commits is the one that completed the record. If a write ended the transaction, the store
// runs no write after it, reads the record back, and the error wraps a [*TxEndedError]
// naming the write:
//
//   - Rolled back: nothing committed, the completion included. The error also wraps
//     [idemstore.ErrNotCommitted] and [idem.ErrStore]; the guard releases the key, and a
//     retry runs the handler again.
//   - Committed: the completion is durable, with the writes before the end, and the writes
//     after it never run. The error is no verdict: the guard sends the completion again,
//     finds it done, and the guarded call succeeds (retries replay it), though not every
//     write ran.
//   - Rolled back, and another transaction begun (found at COMMIT: the record is not
//     completed in it): the store fails its COMMIT, closing the connection, which rolls the
//     new transaction back too, and reports a rollback ([TxEndedError.Index] -1).
//   - Committed, and another transaction begun: the record is completed in it, so the
//     store's COMMIT commits the rest, and Complete succeeds: every write committed, in two
//     transactions. Should a later write fail, the store reports
//     [idem.ErrConditionFailed], though the completion committed; the guard's release,
//     conditional on the record being in progress, then finds it completed, and the
//     guarded call succeeds.
//
// What runs after a write ended the transaction is outside the store's: statements on
// their own commit one by one, and a transaction the write began commits if a later write
// commits it. Nothing undoes them, and after a rollback the retry runs them again.
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
// commit. Then the producer locks of its outbox events' ordering keys, in one sorted order
// (see [outboxLock]), and then the writes. After each write the connection's transaction
// status says whether the write ended the transaction (see [TxEndedError]); the COMMIT is
// checked to be the store's own transaction's (see [Store.begin]).
func (s *Store) completeWith(ctx context.Context, rec *idemstore.Record, attached []any) (err error) {
	writes, err := attachedWrites(s.outboxWrites(attached))
	if err != nil {
		return err
	}
	tx, checked, err := s.begin(ctx, rec)
	if err != nil {
		return s.fail("complete", err) // nothing sent: a resend may do it
	}
	open := true
	closeTx := func() {
		if open {
			open = false
			// A rollback that fails leaves nothing committed either: the server rolls an
			// open transaction back when its connection ends. After a write ended the
			// transaction, it only returns the connection (the server warns, no more).
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}
	defer closeTx()
	var done bool
	var status *string
	if err := tx.QueryRow(ctx, s.sql.completeOwned, completeArgs(rec)...).Scan(&done, &status); err != nil {
		return s.notCommitted(err)
	}
	if !done {
		// A resend of a completion that committed (nil: nothing commits twice), or the
		// lease lost.
		return completedOrLost(done, status)
	}
	if err := s.lockOutbox(ctx, tx, attached); err != nil {
		return s.notCommitted(err)
	}
	conn := tx.Conn().PgConn()
	for i, w := range writes {
		werr := w(ctx, ownedTx{tx})
		if conn.TxStatus() == txIdle {
			// The write committed or rolled back the store's transaction: stop here, and
			// learn from the record which.
			closeTx()
			return s.ended(ctx, rec, &TxEndedError{Index: i, Err: werr})
		}
		if werr != nil {
			if tx.Conn().IsClosed() || isRetryable(werr) || swallowed(conn.TxStatus(), werr) {
				return s.notCommitted(&AttachedWriteError{Index: i, Err: werr})
			}
			return &AttachedWriteError{Index: i, Err: fmt.Errorf("%w: %w", idem.ErrConditionFailed, werr)}
		}
	}
	if conn.TxStatus() == txFailed {
		return s.notCommitted(errTxFailed)
	}
	if !checked {
		ok, err := s.ownedCheck(ctx, tx, rec)
		if err != nil {
			return s.notCommitted(err)
		}
		if !ok {
			closeTx()
			return s.ended(ctx, rec, &TxEndedError{Index: -1})
		}
	}
	err = tx.Commit(ctx)
	open = false // committed, or failed: either way a rollback has nothing left to do
	if isCommitCheck(err) {
		return s.ended(ctx, rec, &TxEndedError{Index: -1})
	}
	return s.commitFail(err)
}

// isRetryable reports whether err, an attached write's, is the server ending or
// cancelling the statement or transaction rather than judging the data: a transaction
// rollback (SQLSTATE class 40: a serialization failure 40001, a deadlock 40P01), a
// cancelled statement (57014: statement_timeout, a cancel request) or a connection
// exception (class 08). Nothing committed, and the same work may succeed when run again,
// as after DynamoDB's TransactionConflict: no verdict on the business condition.
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return strings.HasPrefix(pe.Code, sqlstateClassRollback) || strings.HasPrefix(pe.Code, sqlstateClassConnection) ||
		pe.Code == sqlstateQueryCanceled
}

// swallowed reports whether an attached write that returned err left its transaction
// failed (status) without returning a server error: one of its statements failed, and the
// write returned an error of its own instead of that statement's (a deadlock read as "funds
// short", say). What failed is unknown, so it is no verdict on the business condition:
// nothing committed, and the refusal is retryable, never permanent.
func swallowed(status byte, err error) bool {
	var pe *pgconn.PgError
	return status == txFailed && !errors.As(err, &pe)
}

// The SQLSTATE codes and classes of the server ending a statement or transaction for a
// reason other than the data: see [isRetryable].
const (
	sqlstateClassRollback   = "40"
	sqlstateClassConnection = "08"
	sqlstateQueryCanceled   = "57014"
)

// The transaction statuses of a connection (pgconn.PgConn.TxStatus) the store tells apart.
const (
	txIdle   = 'I' // in no transaction: the store's has ended
	txFailed = 'E' // in a failed transaction, which can only roll back
)

// errTxFailed reports a transaction that failed while every attached write returned nil: a
// write swallowed the error of one of its statements.
var errTxFailed = errors.New("pgstore: complete: the transaction failed, though every attached write returned nil (one ignored a statement's error)")

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
// the write's own error, which errors.Is and errors.As reach (a [*pgconn.PgError] for the
// server's refusal), and [idem.ErrConditionFailed] unless the failure is retryable (the
// connection broke, a serialization failure, a deadlock): the AttachedWriteError then
// comes inside an error wrapping [idemstore.ErrNotCommitted] (see [Attach]).
//
// It implements [idemstore.Refusal]: [AttachedWriteError.Permanent] tells a refusal for
// good, which [idem.IsRefused] reports and [idem.OnRefused] may answer, from one that may
// not recur, and [AttachedWriteError.Reason] says what refused, for the guard's log.
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

// Permanent reports whether the write was refused for good, so that sent again with the
// same data it meets the same refusal:
//   - the server refused a value: a [*pgconn.PgError] of SQLSTATE class 23 (integrity
//     constraint violation: a CHECK, unique, foreign key or not-null constraint) or 22
//     (data exception: a value out of range, too long, of the wrong form);
//   - the write returned an error of its own, without a server error in it: a business
//     rule it checked (a balance too low), or pgx.ErrNoRows;
//
// and not for any other server error (a serialization failure, a deadlock, a statement
// cancelled, an undefined table), a timeout or an ended context, or a broken connection.
//
// The store sees only what the write returns. A write that meets a retryable server error
// and returns an error of its own without wrapping it (say, a deadlock inside a savepoint
// reported as "funds too low") is taken as permanent, and [idem.OnRefused] may store an
// answer that a retry would not have met: wrap the server's error with %w, or return it.
func (e *AttachedWriteError) Permanent() bool {
	if errors.Is(e.Err, idemstore.ErrNotCommitted) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(e.Err, &pe) {
		class := sqlstateClass(pe.Code)
		return class == sqlstateClassIntegrity || class == sqlstateClassData
	}
	return !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) && !pgconn.Timeout(e.Err)
}

// Reason says what refused the write, for an operator's log: the SQLSTATE and the
// constraint, table and column the server names, and the write's position; or that the
// write returned its own error, and its type. It never holds a value (the server's
// message and detail may).
func (e *AttachedWriteError) Reason() string {
	var b strings.Builder
	var pe *pgconn.PgError
	switch {
	case errors.As(e.Err, &pe):
		b.WriteString("SQLSTATE " + pe.Code)
		for _, n := range [...]struct{ name, v string }{{"constraint", pe.ConstraintName}, {"table", pe.TableName}, {"column", pe.ColumnName}} {
			if n.v != "" {
				fmt.Fprintf(&b, " %s %s", n.name, n.v)
			}
		}
	case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded), pgconn.Timeout(e.Err):
		b.WriteString("the context ended or timed out")
	default:
		b.WriteString("the write returned its own error")
		if t := errorType(e.Err); t != "" {
			b.WriteString(" (" + t + ")")
		}
	}
	fmt.Fprintf(&b, ", attached write %d", e.Index)
	return b.String()
}

// errorType returns the type of the deepest error in err's chain (the last cause of one
// with several) that is not of package errors or fmt, or "" if none: a user's own error
// type names the rule that refused, without its values.
func errorType(err error) string {
	t := ""
	for err != nil {
		if n := fmt.Sprintf("%T", err); !strings.HasPrefix(n, "*errors.") && !strings.HasPrefix(n, "*fmt.") {
			t = n
		}
		switch u := err.(type) { //nolint:errorlint // it walks the chain itself
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return t
			}
			err = errs[len(errs)-1]
		default:
			return t
		}
	}
	return t
}

// sqlstateClass returns the class of an SQLSTATE code: its first two characters.
func sqlstateClass(code string) string {
	if len(code) < 2 {
		return ""
	}
	return code[:2]
}

// The SQLSTATE classes of a refusal for good.
const (
	sqlstateClassData      = "22" // data exception
	sqlstateClassIntegrity = "23" // integrity constraint violation
)

// CheckAttached implements [idemstore.AttachChecker]: idem.Attach refuses at once, naming
// its type, a value the completion could not run (anything but a non-nil [Write], a
// function of its signature, or an outbox message, which becomes an INSERT into
// [Store.OutboxTable]), instead of failing the completion after the handler's work. An
// outbox message must be one PostgreSQL stores as recorded: its text fields (id,
// ordering key, destination, type, stored key) and its headers' names and values valid
// UTF-8 without a NUL byte (a text column refuses NUL, jsonb refuses \u0000, and JSON
// would rewrite invalid UTF-8); its payload (bytea) may hold any bytes.
func (s *Store) CheckAttached(attached []any) error {
	msgs, _ := idemstore.SplitOutbox(attached)
	for _, m := range msgs {
		if err := checkOutboxMessage(m); err != nil {
			return err
		}
	}
	_, err := attachedWrites(s.outboxWrites(attached))
	return err
}

// checkOutboxMessage returns an error naming the first field of m that PostgreSQL would
// refuse or that would not be stored as recorded (see [Store.CheckAttached]).
func checkOutboxMessage(m idemstore.OutboxMessage) error {
	for _, f := range [...]struct{ name, v string }{
		{"ID", m.ID}, {"OrderingKey", m.OrderingKey}, {"Destination", m.Destination},
		{"Type", m.Type}, {"StoredKey", m.StoredKey},
	} {
		if err := storableText(f.v); err != nil {
			return fmt.Errorf("pgstore: outbox event %s: %s %w", m.ID, f.name, err)
		}
	}
	for k, v := range m.Headers {
		if err := storableText(k); err != nil {
			return fmt.Errorf("pgstore: outbox event %s: a header name %w", m.ID, err)
		}
		if err := storableText(v); err != nil {
			return fmt.Errorf("pgstore: outbox event %s: header %q %w", m.ID, strings.ToValidUTF8(k, "\uFFFD"), err)
		}
	}
	return nil
}

// storableText returns an error if PostgreSQL cannot store v as text as it is.
func storableText(v string) error {
	switch {
	case !utf8.ValidString(v):
		return errors.New("is not valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return errors.New("holds a NUL byte")
	}
	return nil
}
