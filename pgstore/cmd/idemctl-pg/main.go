// Command idemctl-pg is idemctl's PostgreSQL half: it reads a pgstore outbox's backlog.
// It lives in the pgstore module so that the root module, where idemctl is, never
// requires pgx; idemctl runs it for `idemctl outbox lag --store postgres://…`, found
// beside idemctl or on PATH. Build it with `cd pgstore && go build ./cmd/idemctl-pg`.
//
//	idemctl-pg outbox lag [--store postgres://…] [--table T] [--json]
//
// It only reads. Run `idemctl-pg help` for the details.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/termtext"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

// Exit codes, as idemctl's.
const (
	exitOK     = 0 // done
	exitFailed = 1 // PostgreSQL or the configuration failed, or the output could not be written
	exitUsage  = 2 // bad command line
)

// errUsage marks a bad command line; errHelp a run that printed help on request.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// usage is the help text.
const usage = `idemctl-pg reads a PostgreSQL outbox (pgstore) for operators; idemctl runs it for
idemctl outbox lag --store postgres://...

Usage:
  idemctl-pg outbox lag [--store postgres://USER@HOST/DB] [--table T] [--json]

Commands:
  outbox lag  Print how many events of the outbox table wait to be published and the
              oldest one: its age (the outbox's lag, by the database clock from its
              commit), id, ordering key, destination, type, failed publishes and the last
              one's error. The oldest event heads its ordering key: while a broker
              refuses it, the key's later events wait. One statement: it counts every
              unpublished row of the outbox's partial index. For a metric, poll the
              relay's lag instead (pgoutbox.Hooks.OnLag, one row).

Flags:
  --store URL  the PostgreSQL connection string (default $DATABASE_URL); libpq's
               variables (PGPASSWORD, PGSSLMODE, ...) apply as pgx reads them
  --table T    the idempotency table (default $IDEMPOTENCY_TABLE, else idempotency); its
               outbox is T_outbox ("schema.table" is accepted)
  --json       print JSON instead of text

Exit codes: 0 done, 1 PostgreSQL or configuration failed, 2 bad command line.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, connect: connect}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// app is one run, with everything it touches outside itself.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// connect returns a connection pool on url and a function that closes it.
	connect func(ctx context.Context, url string) (pgoutbox.Querier, func(), error)
}

// connect opens a pool of at most one connection on url.
func connect(ctx context.Context, url string) (pgoutbox.Querier, func(), error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors can quote the connection string, password included.
		return nil, nil, errors.New("--store: not a PostgreSQL connection string")
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return pool, pool.Close, nil
}

// run runs the command line args and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	var err error
	switch {
	case len(args) == 0:
		err = usageError("no command (outbox lag, help)")
	case args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		err = a.say(usage)
	case args[0] == "outbox" && len(args) > 1 && args[1] == "lag":
		err = a.lag(ctx, args[2:])
	default:
		err = usageError("unknown command %q (outbox lag, help)", args[0])
	}
	return a.exit(err)
}

// exit prints err, if any, and returns its exit code.
func (a *app) exit(err error) int {
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage):
		a.note("idemctl-pg: %s\n", termtext.Escaped(err.Error()))
		return exitUsage
	}
	a.note("idemctl-pg: %s\n", termtext.Escaped(err.Error()))
	return exitFailed
}

// say writes s to stdout; an error means the output was lost, and the command fails.
func (a *app) say(s string) error {
	if _, err := io.WriteString(a.stdout, s); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// note writes a message for the operator to stderr; a failed write there is dropped.
func (a *app) note(format string, args ...any) {
	_, _ = fmt.Fprintf(a.stderr, format, args...)
}
