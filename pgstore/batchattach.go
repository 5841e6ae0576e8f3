package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// CompleteManyAttached implements [idemstore.BatchAttachStore]: one transaction for the
// whole batch. It holds one statement that completes every record, each conditional on its
// own lease token and on being in progress (the completeOwned statement of [Attach], for
// many records, taking their row locks in key order), then the producer locks of every
// outbox event of the records it completed, in one sorted order, then the attached writes
// of those records, record by record in order, then COMMIT with the check [Attach]
// describes. A batch of ten completions with a write each thus costs BEGIN, one
// statement, the ten writes and COMMIT, where ten single completions cost four times ten.
//
// Each record keeps the answer [Store.Complete] would give it, and one record's failure
// fails no other:
//
//   - a record whose lease was lost ([idem.ErrLeaseLost]), or that is completed under its
//     token already (a resend of a transaction that committed: nil), is not completed,
//     and its writes never run;
//   - a write that fails its own condition gets its record an [*AttachedWriteError]
//     wrapping [idem.ErrConditionFailed]; a record whose writes left the transaction
//     failed while returning nil gets [idemstore.ErrNotCommitted]. The transaction rolls
//     back, and is run again without that record, its writes run again with it;
//   - anything that is no verdict on one record (a broken connection, a serialization
//     failure or deadlock, a COMMIT the server refused) rolls the transaction back, and
//     the records left are completed one by one with Complete;
//   - a COMMIT whose outcome is unknown fails each record left with an
//     [*idem.StoreError], and the guard sends each alone again with Complete, which
//     commits nothing twice.
//
// A write that ends the transaction itself, which [Attach] forbids, ends it for the whole
// batch: its record gets the answer Attach describes, and every other record of the
// transaction an [*idem.StoreError], so the guard sends each alone again. If the write
// committed, the records after it committed their completions without their writes, which
// never run: a misuse that a single completion confines to its own record.
//
// A key the batch holds twice is completed in the transaction once, and its later records
// one by one with Complete.
func (s *Store) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	out := make([]error, len(recs))
	writes := make([][]Write, len(recs))
	attachedOf := func(i int) []any {
		if i < len(attached) {
			return attached[i]
		}
		return nil
	}
	att := make([][]any, len(recs))
	for i := range recs {
		att[i] = attachedOf(i)
	}
	first, again := distinct(len(recs), func(i int) string { return recs[i].Key })
	var idx []int
	for _, i := range first {
		if recs[i].LeaseToken == "" {
			out[i] = errors.New("pgstore: complete: record has no lease token")
			continue
		}
		w, err := attachedWrites(s.outboxWrites(attachedOf(i)))
		if err != nil {
			out[i] = err
			continue
		}
		writes[i] = w
		idx = append(idx, i)
	}
	// Each transaction that does not commit settles at least one record, so this ends.
	for len(idx) > 0 {
		idx = s.commitBatch(ctx, recs, att, writes, idx, out)
	}
	for _, i := range again {
		out[i] = s.Complete(ctx, recs[i], attachedOf(i))
	}
	return out
}

// commitBatch runs one transaction of the batch completion of recs[i], i in idx, with
// their writes, and puts the answers it settles in out. It returns the records to send in
// one more transaction: those left when it rolled back for one record's sake.
func (s *Store) commitBatch(ctx context.Context, recs []*idemstore.Record, att [][]any, writes [][]Write, idx []int, out []error) (rest []int) {
	lead := recs[idx[0]] // the record the COMMIT's check reads
	tx, checked, err := s.begin(ctx, lead)
	if err != nil {
		for _, i := range idx {
			out[i] = s.fail("complete", err) // nothing sent: a resend may do it
		}
		return nil
	}
	open := true
	closeTx := func() {
		if open {
			open = false
			_ = tx.Rollback(context.WithoutCancel(ctx)) // see Store.completeWith
		}
	}
	defer closeTx()
	done, status, err := s.completeBatch(ctx, tx, recs, idx)
	if err != nil {
		closeTx()
		return s.eachAlone(ctx, recs, att, idx, out)
	}
	var completed []int
	for j, i := range idx {
		switch {
		case done[j]:
			completed = append(completed, i)
		case status[j] != nil && *status[j] != string(idemstore.StatusInProgress):
			out[i] = nil // a resend of a completion that committed: nothing commits twice
		default:
			out[i] = fmt.Errorf("pgstore: complete: %w", idem.ErrLeaseLost)
		}
	}
	if len(completed) == 0 {
		return nil
	}
	if !done[0] {
		// The COMMIT's check reads the lead record, which this transaction did not
		// complete: send the others in a transaction of their own.
		closeTx()
		return completed
	}
	// Every outbox event's producer lock, in one sorted order, before any write (see
	// outboxLock).
	locks := make([][]any, len(completed))
	for j, i := range completed {
		locks[j] = att[i]
	}
	if err := s.lockOutbox(ctx, tx, locks...); err != nil {
		closeTx()
		return s.eachAlone(ctx, recs, att, completed, out)
	}
	conn := tx.Conn().PgConn()
	for _, i := range completed {
		for k, w := range writes[i] {
			werr := w(ctx, ownedTx{tx})
			if conn.TxStatus() == txIdle {
				closeTx()
				out[i] = s.ended(ctx, recs[i], &TxEndedError{Index: k, Err: werr})
				s.endedByAnother(completed, i, k, out)
				return nil
			}
			if werr == nil {
				continue
			}
			closeTx()
			if tx.Conn().IsClosed() || isRetryable(werr) {
				return s.eachAlone(ctx, recs, att, completed, out)
			}
			out[i] = &AttachedWriteError{Index: k, Err: fmt.Errorf("%w: %w", idem.ErrConditionFailed, werr)}
			return without(completed, i)
		}
		if conn.TxStatus() == txFailed {
			closeTx()
			out[i] = s.notCommitted(errTxFailed)
			return without(completed, i)
		}
	}
	if !checked {
		ok, err := s.ownedCheck(ctx, tx, lead)
		if err != nil {
			closeTx()
			return s.eachAlone(ctx, recs, att, completed, out)
		}
		if !ok {
			closeTx()
			s.endedByAnother(completed, -1, -1, out)
			return nil
		}
	}
	err = tx.Commit(ctx)
	open = false
	switch {
	case err == nil:
		for _, i := range completed {
			out[i] = nil
		}
	case isCommitCheck(err):
		s.endedByAnother(completed, -1, -1, out)
	default:
		cerr := s.commitFail(err)
		if errors.Is(cerr, idemstore.ErrNotCommitted) {
			// Refused by the server (a deferred constraint, say), for no record named.
			return s.eachAlone(ctx, recs, att, completed, out)
		}
		for _, i := range completed {
			out[i] = cerr // unknown outcome: the guard resends each alone
		}
	}
	return nil
}

// completeBatch runs the batch completeOwned statement in tx for recs[i], i in idx: for
// each, whether it completed it, and else the status of the record under its token.
func (s *Store) completeBatch(ctx context.Context, tx pgx.Tx, recs []*idemstore.Record, idx []int) ([]bool, []*string, error) {
	rows, err := tx.Query(ctx, s.batch.completeOwned, completeArrays(recs, idx)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	n := len(idx)
	done, status := make([]bool, n), make([]*string, n)
	for rows.Next() {
		var pos int64
		var d bool
		var st *string
		if err := rows.Scan(&pos, &d, &st); err != nil {
			return nil, nil, err
		}
		if pos < 1 || pos > int64(n) {
			return nil, nil, fmt.Errorf("pgstore: complete: the statement answered for record %d of %d", pos, n)
		}
		done[pos-1], status[pos-1] = d, st
	}
	return done, status, rows.Err()
}

// eachAlone completes recs[i], i in idx, one by one with Complete: the answer for records
// of a transaction that rolled back for no record's own sake.
func (s *Store) eachAlone(ctx context.Context, recs []*idemstore.Record, att [][]any, idx []int, out []error) []int {
	for _, i := range idx {
		out[i] = s.Complete(ctx, recs[i], att[i])
	}
	return nil
}

// endedByAnother answers the records of idx other than i, whose transaction write k of
// record i ended (i -1: a write found at COMMIT), with an [*idem.StoreError]: what of
// theirs committed is unknown here, and the guard sends each alone again.
func (s *Store) endedByAnother(idx []int, i, k int, out []error) {
	for _, j := range idx {
		if j == i {
			continue
		}
		who := "an attached write of the batch"
		if i >= 0 {
			who = fmt.Sprintf("attached write %d of record %d of the batch", k, i)
		}
		out[j] = &idem.StoreError{Op: "complete", Err: fmt.Errorf("pgstore: complete: %s ended the completion's transaction", who)}
	}
}

// without returns idx without i.
func without(idx []int, i int) []int {
	rest := make([]int, 0, len(idx))
	for _, j := range idx {
		if j != i {
			rest = append(rest, j)
		}
	}
	return rest
}
