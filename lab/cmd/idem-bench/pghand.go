package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lab/bench"
	"github.com/idemkit/idem/pgstore"
)

// handWritten runs, on PostgreSQL, idem with an attached business write beside the two
// designs users write by hand instead, each with the same business write (one INSERT of
// the order, the event's 256-byte body) on the same server, as sequential invocations on
// fresh keys and then their replays:
//
//   - P1, P2: idem.Do whose handler attaches the write (pgstore.Attach): a claim, then one
//     transaction of the completion, the write and COMMIT; a replay is the claim.
//   - H1, H1r: a processed_events table, insert-or-skip in the business transaction:
//     BEGIN, INSERT ... ON CONFLICT DO NOTHING of the event id, the write if it inserted,
//     COMMIT. It stores no response: a duplicate is skipped, not answered.
//   - H2, H2r: a Stripe-style idempotency_keys table with the stored response: BEGIN,
//     INSERT ... ON CONFLICT DO NOTHING of the key (which waits for a concurrent
//     transaction of the key), then the write and an UPDATE storing the response, or, for
//     a key that exists, a SELECT of the stored response; COMMIT.
//
// P1c, H1c and H2c are P1, H1 and H2 on fresh keys of their own, run by [Workers]
// goroutines at once: their ops_per_s is the throughput of each design under that load.
type handWritten struct {
	b      *bench.Bench
	pool   *pgxpool.Pool
	m      *bench.Meter
	orders string // the business table
	events string // processed_events
	keys   string // idempotency_keys
}

// createHandWritten creates the tables of the hand-written designs and the business table.
func createHandWritten(ctx context.Context, pool *pgxpool.Pool, suffix string) (*handWritten, error) {
	h := &handWritten{pool: pool, orders: "bench_orders_" + suffix, events: "processed_events_" + suffix, keys: "idempotency_keys_" + suffix}
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id text PRIMARY KEY, body text NOT NULL);
CREATE TABLE %s (id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE %s (key text PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(), response bytea)`,
		h.orders, h.events, h.keys), pgx.QueryExecModeSimpleProtocol)
	return h, err
}

// steps returns P1, P2, H1, H1r, H2, H2r on fresh events.
func (h *handWritten) steps(b *bench.Bench, m *bench.Meter) []bench.Step {
	h.b, h.m = b, m
	n := b.Counts().Invocations
	p, e1, e2 := bench.NewEvents(n), bench.NewEvents(n), bench.NewEvents(n)
	pc, e1c, e2c := bench.NewEvents(n), bench.NewEvents(n), bench.NewEvents(n)
	return []bench.Step{
		func() *bench.Result { return h.idem("P1_idem_attached_new_keys", p, false, 1) },
		func() *bench.Result { return h.idem("P2_idem_attached_replays", p, true, 1) },
		func() *bench.Result { return h.processedEvents("H1_processed_events_new_keys", e1, false, 1) },
		func() *bench.Result { return h.processedEvents("H1r_processed_events_duplicates", e1, true, 1) },
		func() *bench.Result { return h.idempotencyKeys("H2_idempotency_keys_new_keys", e2, false, 1) },
		func() *bench.Result { return h.idempotencyKeys("H2r_idempotency_keys_replays", e2, true, 1) },
		func() *bench.Result { return h.idem("P1c_idem_attached_new_keys_16_workers", pc, false, Workers) },
		func() *bench.Result {
			return h.processedEvents("H1c_processed_events_new_keys_16_workers", e1c, false, Workers)
		},
		func() *bench.Result {
			return h.idempotencyKeys("H2c_idempotency_keys_new_keys_16_workers", e2c, false, Workers)
		},
	}
}

// Workers is the callers at once of P1c, H1c and H2c.
const Workers = 16

// run runs op over n invocations: one after another for one worker, else on workers
// goroutines at once.
func (h *handWritten) run(name string, n, workers int, op func(ctx context.Context, i int) bool) (*bench.Result, int) {
	if workers <= 1 {
		return h.b.Sequential(name, "invocation", n, op)
	}
	return h.b.Concurrent(name, "invocation", n, workers, op)
}

// write is the business write of every design.
func (h *handWritten) write(ctx context.Context, tx pgx.Tx, ev bench.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+h.orders+` (id, body) VALUES ($1, $2)`, ev.ID, ev.Body)
	return err
}

func (h *handWritten) idem(name string, evs []bench.Event, replay bool, workers int) *bench.Result {
	var runs atomic.Int64
	r, failed := h.run(name, len(evs), workers, func(ctx context.Context, i int) bool {
		ev := evs[i]
		res, replayed, err := idem.Do(ctx, h.b.Guard, idem.Request{Key: ev.ID}, func(ctx context.Context) (bench.Response, error) {
			runs.Add(1)
			return bench.Response{OK: true, ID: ev.ID}, pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error { return h.write(ctx, tx, ev) })
		})
		return err == nil && replayed == replay && res.ID == ev.ID
	})
	r.Check(failed == 0, "%d invocations failed", failed)
	h.checkRuns(r, int(runs.Load()), len(evs), replay)
	return r
}

func (h *handWritten) processedEvents(name string, evs []bench.Event, duplicate bool, workers int) *bench.Result {
	var runs atomic.Int64
	r, failed := h.run(name, len(evs), workers, func(ctx context.Context, i int) bool {
		ev := evs[i]
		err := h.tx(ctx, func(tx pgx.Tx) error {
			h.m.Call("Exec", 0)
			tag, err := tx.Exec(ctx, `INSERT INTO `+h.events+` (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, ev.ID)
			if err != nil || tag.RowsAffected() == 0 {
				return err // a duplicate: skipped
			}
			runs.Add(1)
			h.m.Call("Exec", 0)
			return h.write(ctx, tx, ev)
		})
		return err == nil
	})
	r.Check(failed == 0, "%d invocations failed", failed)
	h.checkRuns(r, int(runs.Load()), len(evs), duplicate)
	return r
}

func (h *handWritten) idempotencyKeys(name string, evs []bench.Event, replay bool, workers int) *bench.Result {
	var runs atomic.Int64
	r, failed := h.run(name, len(evs), workers, func(ctx context.Context, i int) bool {
		ev := evs[i]
		var res bench.Response
		err := h.tx(ctx, func(tx pgx.Tx) error {
			h.m.Call("Exec", 0)
			tag, err := tx.Exec(ctx, `INSERT INTO `+h.keys+` (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, ev.ID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				var stored []byte
				h.m.Call("QueryRow", 0)
				if err := tx.QueryRow(ctx, `SELECT response FROM `+h.keys+` WHERE key = $1`, ev.ID).Scan(&stored); err != nil {
					return err
				}
				if stored == nil {
					return errors.New("in progress")
				}
				return json.Unmarshal(stored, &res)
			}
			runs.Add(1)
			res = bench.Response{OK: true, ID: ev.ID}
			body, err := json.Marshal(res)
			if err != nil {
				return err
			}
			h.m.Call("Exec", 0)
			if err := h.write(ctx, tx, ev); err != nil {
				return err
			}
			h.m.Call("Exec", 0)
			_, err = tx.Exec(ctx, `UPDATE `+h.keys+` SET response = $2 WHERE key = $1`, ev.ID, body)
			return err
		})
		return err == nil && res.ID == ev.ID
	})
	r.Check(failed == 0, "%d invocations failed", failed)
	h.checkRuns(r, int(runs.Load()), len(evs), replay)
	return r
}

// tx runs fn in a transaction, counting BEGIN and COMMIT (or ROLLBACK) as calls.
func (h *handWritten) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	h.m.Call("Begin", 0)
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		h.m.Call("Rollback", 0)
		return errors.Join(err, tx.Rollback(ctx))
	}
	h.m.Call("Commit", 0)
	return tx.Commit(ctx)
}

// checkRuns checks that the business write ran once per new key and never for a replay.
func (h *handWritten) checkRuns(r *bench.Result, runs, n int, replay bool) {
	want := n
	if replay {
		want = 0
	}
	r.Check(runs == want, "the business write ran %d times, want %d", runs, want)
}

// countingTx counts the statements of a transaction the store begins.
type countingTx struct {
	pgx.Tx
	m *bench.Meter
}

func (t *countingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.m.Call("Exec", 0)
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *countingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t.m.Call("Query", 0)
	return t.Tx.Query(ctx, sql, args...)
}

func (t *countingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t.m.Call("QueryRow", 0)
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *countingTx) Commit(ctx context.Context) error {
	t.m.Call("Commit", 0)
	return t.Tx.Commit(ctx)
}

func (t *countingTx) Rollback(ctx context.Context) error {
	t.m.Call("Rollback", 0)
	return t.Tx.Rollback(ctx)
}
