package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// ClaimMany implements [idemstore.BatchStore] with one statement for the whole batch: the
// upsert of [Store.Claim] for every record, inserted in key order, whose refused rows come
// back from the same statement. Each key is decided exactly as Claim decides it (expired
// records, ended leases, tombstones, checkpoints), and a resend of the claim's own token
// is refused by the record it wrote, as Claim's is. So a batch of new keys, of replays, of
// keys in flight or of takeovers costs one round trip. A refusing record created while the
// statement waited is out of its sight, as with Claim: that key alone is claimed again
// with Claim. A key the batch holds twice (the guard never sends one: its batch claim runs
// duplicates once) is claimed in the statement once, and its later records one by one
// after it, as Claim called in turn would. A failed statement fails every record of it
// with an [*idem.StoreError].
func (s *Store) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	first, again := distinct(len(recs), func(i int) string { return recs[i].Key })
	var unseen []int
	if len(first) > 0 {
		unseen = s.claimBatch(ctx, recs, first, now, out)
	}
	for _, i := range append(unseen, again...) {
		out[i].Prev, out[i].Claimed, out[i].Err = s.Claim(ctx, recs[i], now)
	}
	return out
}

// claimBatch claims recs[i] for i in idx with one statement and puts the answers in out. It
// returns the records whose refusing record the statement could not see.
func (s *Store) claimBatch(ctx context.Context, recs []*idemstore.Record, idx []int, now time.Time, out []idemstore.ClaimResult) []int {
	n := len(idx)
	var (
		ids, statuses                       = make([]string, n), make([]string, n)
		expires, leases                     = make([]*time.Time, n), make([]*time.Time, n)
		fps, encodings, tokens, checkpoints = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		data                                = make([][]byte, n)
		versions                            = make([]int32, n)
		seqs                                = make([]int64, n)
	)
	for j, i := range idx {
		r := recs[i]
		ids[j], statuses[j], expires[j], leases[j] = r.Key, string(r.Status), endPtr(r.Expires), endPtr(r.LeaseExpires)
		fps[j], data[j], encodings[j], tokens[j] = textPtr(r.Fingerprint), r.Data, textPtr(r.Encoding), textPtr(r.LeaseToken)
		checkpoints[j], versions[j], seqs[j] = textPtr(r.Checkpoint), int32(r.Version), r.CheckpointSeq
	}
	res := make([]idemstore.ClaimResult, n)
	var unseen []int
	err := func() error {
		s.claimSQL() // sets claimBatchText
		rows, err := s.db.Query(ctx, s.claimBatchText, ids, statuses, expires, leases, fps, data, encodings,
			tokens, checkpoints, versions, seqs, at(now), idemstore.ReleasedToken(""))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var pos int64
			var claimed bool
			var r row
			if err := rows.Scan(append([]any{&pos, &claimed}, r.dest()...)...); err != nil {
				return err
			}
			if pos < 1 || pos > int64(n) {
				return fmt.Errorf("pgstore: claim: the statement answered for record %d of %d", pos, n)
			}
			j := int(pos - 1)
			switch {
			case claimed:
				res[j].Claimed = true
			case r.id == nil:
				// Created by a claim that committed while ours waited.
				unseen = append(unseen, idx[j])
			default:
				res[j].Prev, res[j].Err = r.record()
			}
		}
		return rows.Err()
	}()
	if err != nil {
		// A statement that failed, or whose answer broke off, may or may not have
		// committed: no record's answer stands.
		for _, i := range idx {
			out[i] = idemstore.ClaimResult{Err: s.fail("claim", err)}
		}
		return nil
	}
	for j, i := range idx {
		out[i] = res[j]
	}
	return unseen
}

// CompleteMany implements [idemstore.BatchStore] with one statement: the UPDATE of
// [Store.Complete] for every record, each conditional on its own lease token and on the
// record being in progress, so a record whose lease was taken over gets
// [idem.ErrLeaseLost] and the others complete. Like Complete, a completion that finds its
// record completed under its token already (a resend) writes nothing and returns nil. A
// key the batch holds twice is completed in the statement once, and its later records one
// by one with Complete. A failed statement fails every record of it with an
// [*idem.StoreError].
func (s *Store) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	out := make([]error, len(recs))
	first, again := distinct(len(recs), func(i int) string { return recs[i].Key })
	idx := first[:0:0]
	for _, i := range first {
		if recs[i].LeaseToken == "" {
			out[i] = errors.New("pgstore: complete: record has no lease token")
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) > 0 {
		done, err := s.returning(ctx, s.batch.complete, len(idx), completeArrays(recs, idx)...)
		for j, i := range idx {
			switch {
			case err != nil:
				out[i] = s.fail("complete", err)
			case !done[j]:
				out[i] = fmt.Errorf("pgstore: complete: %w", idem.ErrLeaseLost)
			}
		}
	}
	for _, i := range again {
		out[i] = s.Complete(ctx, recs[i], nil)
	}
	return out
}

// ReleaseMany implements [idemstore.BatchStore] with one statement: the UPDATE of
// [Store.Release] for every key, each conditional on its token and on the record being in
// progress ([idem.ErrLeaseLost] where it is not), each left as a tombstone. A key the
// batch holds twice is released in the statement once, and its later entries one by one
// with Release. A failed statement fails every key of it with an [*idem.StoreError].
func (s *Store) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	out := make([]error, len(keys))
	if len(tokens) != len(keys) {
		for i := range out {
			out[i] = errors.New("pgstore: release: keys and tokens differ in number")
		}
		return out
	}
	first, again := distinct(len(keys), func(i int) string { return keys[i] })
	if len(first) > 0 {
		ks, ts := make([]string, len(first)), make([]string, len(first))
		for j, i := range first {
			ks[j], ts[j] = keys[i], tokens[i]
		}
		done, err := s.returning(ctx, s.batch.release, len(first), ks, ts, at(now), idemstore.ReleasedToken(""))
		for j, i := range first {
			switch {
			case err != nil:
				out[i] = s.fail("release", err)
			case !done[j]:
				out[i] = fmt.Errorf("pgstore: release: %w", idem.ErrLeaseLost)
			}
		}
	}
	for _, i := range again {
		out[i] = s.Release(ctx, keys[i], tokens[i], now)
	}
	return out
}

// returning runs a batch statement that returns the positions (from 1) of the n input rows
// it changed, and reports which it changed.
func (s *Store) returning(ctx context.Context, sql string, n int, args ...any) ([]bool, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := make([]bool, n)
	for rows.Next() {
		var pos int64
		if err := rows.Scan(&pos); err != nil {
			return nil, err
		}
		if pos < 1 || pos > int64(n) {
			return nil, fmt.Errorf("pgstore: the statement answered for row %d of %d", pos, n)
		}
		done[pos-1] = true
	}
	return done, rows.Err()
}

// completeArrays returns the parameters of the batch completion statements for recs[i], i
// in idx: completeArgs's, one array each.
func completeArrays(recs []*idemstore.Record, idx []int) []any {
	n := len(idx)
	ids, statuses, expires := make([]string, n), make([]string, n), make([]*time.Time, n)
	fps, data, encodings := make([]*string, n), make([][]byte, n), make([]*string, n)
	versions, tokens := make([]int32, n), make([]string, n)
	for j, i := range idx {
		r := recs[i]
		ids[j], statuses[j], expires[j] = r.Key, string(r.Status), endPtr(r.Expires)
		fps[j], data[j], encodings[j] = textPtr(r.Fingerprint), r.Data, textPtr(r.Encoding)
		versions[j], tokens[j] = int32(r.Version), r.LeaseToken
	}
	return []any{ids, statuses, expires, fps, data, encodings, versions, tokens}
}

// distinct splits the positions 0..n-1 by the key at each: the first position of every
// key, and the later ones, each in order.
func distinct(n int, key func(int) string) (first, again []int) {
	seen := make(map[string]bool, n)
	for i := range n {
		k := key(i)
		if seen[k] {
			again = append(again, i)
			continue
		}
		seen[k] = true
		first = append(first, i)
	}
	return first, again
}

// textPtr is text for an array element: nil (NULL) when s is empty.
func textPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// endPtr is end for an array element: nil (NULL) when t is zero.
func endPtr(t time.Time) *time.Time {
	e, ok := end(t).(time.Time)
	if !ok {
		return nil
	}
	return &e
}

var _ idemstore.BatchAttachStore = (*Store)(nil)
