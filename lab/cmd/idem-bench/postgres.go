package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/lab/bench"
	"github.com/idemkit/idem/pgstore"
)

// openPostgres starts PostgreSQL unless o names a server, and builds one pool of W3's
// size in o's exec mode, a fresh table and the store over a wrapper that counts the
// statements. The table is left on a server o names. Its workloads are W1–W4b, the raw
// floor X1, X2 (see pgfloor.go), and idem with an attached write beside the hand-written
// designs, P1–H2r (see pghand.go).
func openPostgres(ctx context.Context, o options) (t *target, err error) {
	m := &bench.Meter{}
	var server *pgserver.Server
	var pool *pgxpool.Pool
	t = &target{meter: m, sqs: true, close: func() error {
		if pool != nil {
			pool.Close()
		}
		if server != nil {
			return server.Close()
		}
		return nil
	}}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.close())
		}
	}()
	url := o.url
	if url == "" {
		if server, err = pgserver.Start(ctx); err != nil {
			return nil, err
		}
		url, m.ServerPID = server.URL(), server.PID()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	switch o.mode {
	case "", "exec":
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	case "cache":
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	default:
		return nil, fmt.Errorf("idem-bench: -mode %q: want exec or cache", o.mode)
	}
	cfg.MaxConns = bench.W3Goroutines
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	table := "idem_bench_" + bench.Token()[:12]
	if err := pgstore.CreateTable(ctx, pool, table); err != nil {
		return nil, err
	}
	db := &statements{DB: pool, pool: pool, m: m}
	if t.store, err = pgstore.New(db, table); err != nil {
		return nil, err
	}
	h, err := createHandWritten(ctx, pool, table[len("idem_bench_"):])
	if err != nil {
		return nil, err
	}
	t.extra = func(b *bench.Bench) []bench.Step {
		x, y := newPGFloor(b, db, table), newPGFloor(b, db, table)
		steps := append([]bench.Step{x.insertUpdate, x.insertConflict}, pairSteps(b, y.newKey, y.replay)...)
		return append(steps, h.steps(b, m)...)
	}
	return t, nil
}

// statements counts the statements the store sends, by method, those of its transactions
// (with attached writes: P1) included. It begins transactions and reports the pool's
// configuration as the pool does, so the store sends the check with its COMMIT and, in
// pgx's default mode, prepares it.
type statements struct {
	pgstore.DB
	pool *pgxpool.Pool
	m    *bench.Meter
}

// BeginTx counts a "Begin" and begins through the pool.
func (s *statements) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	s.m.Call("Begin", 0)
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, m: s.m}, nil
}

// Config returns the pool's configuration.
func (s *statements) Config() *pgxpool.Config { return s.pool.Config() }

func (s *statements) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s.m.Call("Exec", 0)
	return s.DB.Exec(ctx, sql, args...)
}

func (s *statements) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	s.m.Call("Query", 0)
	return s.DB.Query(ctx, sql, args...)
}

func (s *statements) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	s.m.Call("QueryRow", 0)
	return s.DB.QueryRow(ctx, sql, args...)
}

func (s *statements) Begin(ctx context.Context) (pgx.Tx, error) {
	s.m.Call("Begin", 0)
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, m: s.m}, nil
}
