package pgstoretest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// Environment variables read by this package.
const (
	// EnvURL names a PostgreSQL server to use instead of starting one, as a connection
	// string (postgres://user@host:5432/db): [URL] returns it, and nothing is started.
	EnvURL = pgtest.EnvURL
	// EnvRequire, when set (to anything), turns every reason to skip a PostgreSQL test
	// into a failure.
	EnvRequire = pgtest.EnvRequire
)

// Main runs a test binary's tests and stops the binary's server, if it started one; call it
// from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgstoretest.Main(m)) }
//
// It starts the server before the tests, unless [EnvURL] is set. When no server can be had,
// it fails the binary at once with [EnvRequire] set; otherwise the tests run, each that
// asks for the server skips, and the binary's examples are left out (as with -skip
// '^Example'), since an example cannot skip and would fail its output: Main says so on
// standard error. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	flag.Parse()
	if _, err := pgtest.SharedURL(); err != nil && os.Getenv(EnvRequire) == "" {
		proctest.LeaveOutExamples()
		fmt.Fprintf(os.Stderr, "pgstoretest: no PostgreSQL, so the examples are left out: %v\n", err)
	}
	return pgtest.Main(m)
}

// URL returns the connection string of the test binary's server: [EnvURL] if set, else
// that of the server the binary starts on the first call. When no server can be had it
// skips tb, or fails it with [EnvRequire] set. It is safe for concurrent use.
func URL(tb testing.TB) string {
	tb.Helper()
	return pgtest.URL(tb)
}

// Pool returns a pool on the test binary's server (see [URL]) whose connections work in a
// schema of tb's own: created now, it comes first in their search_path (then public), so
// the tables a test creates without a schema name land there, and it is dropped with
// everything in it, and the pool closed, when tb ends. Each call makes a new schema. It
// fails tb on error.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, closeFn, err := open(ctx, URL(tb))
	if err != nil {
		tb.Fatalf("pgstoretest: %v", err)
	}
	tb.Cleanup(func() {
		if err := closeFn(); err != nil {
			tb.Errorf("pgstoretest: %v", err)
		}
	})
	return pool
}

// Open is [Pool] for code without a testing.TB, such as an Example function: it returns a
// pool in a schema of its own on the test binary's server, and a function that drops the
// schema with everything in it and closes the pool. It returns an error when no server can
// be had, in which case [Main] has left the binary's examples out.
func Open(ctx context.Context) (*pgxpool.Pool, func() error, error) {
	url, err := pgtest.SharedURL()
	if err != nil {
		return nil, nil, fmt.Errorf("pgstoretest: no PostgreSQL (set %s, or install PostgreSQL 15+): %w", EnvURL, err)
	}
	return open(ctx, url)
}

// open creates a schema on url's server and returns a pool that works in it.
func open(ctx context.Context, url string) (*pgxpool.Pool, func() error, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	schema := pgx.Identifier{pgtest.Name("idem_test")}.Sanitize()
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	path := schema + ", public"
	if p := cfg.ConnConfig.RuntimeParams["search_path"]; p != "" {
		path = schema + ", " + p
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = path
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	closeFn := func() error {
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE", pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	return pool, closeFn, nil
}

// NewStore returns a [pgstore.Store] over a new idempotency table with a name of its own,
// created through db (a pool from [Pool], or nil for a new one), and dropped when tb ends.
// The store's writes, attached writes included, go through db, so the tables a handler
// writes to belong where db's connections find them. It fails tb on error.
func NewStore(tb testing.TB, db pgstore.DB) *pgstore.Store {
	tb.Helper()
	if db == nil {
		db = Pool(tb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := pgtest.Name("idempotency")
	if err := pgstore.CreateTable(ctx, db, table); err != nil {
		tb.Fatalf("pgstoretest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := db.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize(), pgx.QueryExecModeSimpleProtocol); err != nil {
			tb.Errorf("pgstoretest: drop table %s: %v", table, err)
		}
	})
	store, err := pgstore.New(db, table)
	if err != nil {
		tb.Fatalf("pgstoretest: %v", err)
	}
	return store
}
