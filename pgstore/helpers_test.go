package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// The pool satisfies the store's interface.
var _ pgstore.DB = (*pgxpool.Pool)(nil)

// newStore returns a store on a fresh table of the shared server, through db if not nil
// (it must reach that server), else through a pool of its own.
func newStore(t *testing.T, db pgstore.DB) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	if db == nil {
		db = pool
	}
	table := pgtest.Name("idem")
	require.NoError(t, pgstore.CreateTable(context.Background(), pool, table))
	s, err := pgstore.New(db, table)
	require.NoError(t, err)
	return s, pool
}

// ledger is a business table whose balances attached writes change.
type ledger struct {
	pool  *pgxpool.Pool
	table string
}

func newLedger(t *testing.T, pool *pgxpool.Pool) *ledger {
	t.Helper()
	l := &ledger{pool: pool, table: pgtest.Name("ledger")}
	_, err := pool.Exec(context.Background(), fmt.Sprintf(
		`CREATE TABLE %s (account text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))`, l.table))
	require.NoError(t, err)
	return l
}

// add returns a write that adds n to account; with failCond, after adding it breaks the
// balance's CHECK constraint, so the transaction must roll back (the add included).
func (l *ledger) add(account string, n int, failCond bool) pgstore.Write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s AS l VALUES ($1, $2)
			ON CONFLICT (account) DO UPDATE SET balance = l.balance + excluded.balance`, l.table), account, n)
		if err != nil || !failCond {
			return err
		}
		_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET balance = -1 WHERE account = $1`, l.table), account)
		return err
	}
}

func (l *ledger) balance(t *testing.T, account string) int {
	t.Helper()
	var n int
	err := l.pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT balance FROM %s WHERE account = $1`, l.table), account).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return n
}

// counter is a [pgstore.DB] that counts the statements sent through it, in transactions
// too, by kind: "exec", "query", "begin", "commit", "rollback". It is how the tests count
// round trips instead of assuming them.
type counter struct {
	db pgstore.DB
	mu sync.Mutex
	n  map[string]int
}

func newCounter(db pgstore.DB) *counter { return &counter{db: db, n: map[string]int{}} }

func (c *counter) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[kind]++
}

// take returns the counts so far and resets them.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *counter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.count("exec")
	return c.db.Exec(ctx, sql, args...)
}

func (c *counter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.count("query")
	return c.db.Query(ctx, sql, args...)
}

func (c *counter) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.count("query")
	return c.db.QueryRow(ctx, sql, args...)
}

func (c *counter) Begin(ctx context.Context) (pgx.Tx, error) {
	c.count("begin")
	tx, err := c.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: c}, nil
}

// BeginTx counts a "begin" and begins through the wrapped db's BeginTx, as the store does
// with a pool.
func (c *counter) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c.count("begin")
	tx, err := c.db.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: c}, nil
}

// Config returns the wrapped pool's configuration, as a *pgxpool.Pool does: the store
// reads its query mode from it (it prepares its commit check in pgx's default mode).
func (c *counter) Config() *pgxpool.Config { return c.db.(*pgxpool.Pool).Config() }

// countingTx counts the statements of a transaction begun through a counter.
type countingTx struct {
	pgx.Tx
	c *counter
}

func (t *countingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.c.count("exec")
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *countingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t.c.count("query")
	return t.Tx.Query(ctx, sql, args...)
}

func (t *countingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t.c.count("query")
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *countingTx) Commit(ctx context.Context) error {
	t.c.count("commit")
	return t.Tx.Commit(ctx)
}

func (t *countingTx) Rollback(ctx context.Context) error {
	t.c.count("rollback")
	return t.Tx.Rollback(ctx)
}
