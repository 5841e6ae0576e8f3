// Package pgtest gives the PostgreSQL store's tests a real server: the one DATABASE_URL names,
// else a PostgreSQL 15+ started once per test binary on 127.0.0.1 (by internal/pgserver, as
// an unprivileged user when the tests run as root) and stopped by process id when the tests
// end. Tests that
// cannot have a server fail when IDEM_REQUIRE_POSTGRES is set (make test sets it) and skip
// with the reason otherwise.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/pgserver"
	"github.com/idemkit/idem/internal/proctest"
)

// EnvURL names a server to use instead of starting one.
const EnvURL = "DATABASE_URL"

// EnvRequire names the variable that makes the PostgreSQL tests required. When it is set,
// every reason to skip one is a failure.
const EnvRequire = "IDEM_REQUIRE_POSTGRES"

// Server is a PostgreSQL server started on 127.0.0.1: see [pgserver.Server].
type Server = pgserver.Server

// Start starts a server on a fresh data directory: see [pgserver.Start].
func Start(ctx context.Context) (*Server, error) { return pgserver.Start(ctx) }

// shared is the test binary's server, started on first use by [URL].
var shared struct {
	once   sync.Once
	server *Server
	url    string
	err    error
}

// Main runs a test binary's tests and stops the shared server, if one was started; call it
// from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// With [EnvRequire] set and neither [EnvURL] nor an installed PostgreSQL, it fails the
// binary at once, naming what is missing. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	flag.Parse()
	if os.Getenv(EnvRequire) != "" && os.Getenv(EnvURL) == "" {
		if _, err := pgserver.Locate(); err != nil {
			fmt.Fprintf(os.Stderr, "%v (%s is set, so PostgreSQL tests may not skip)\n", err, EnvRequire)
			return 1
		}
	}
	code := m.Run()
	if shared.server != nil {
		if err := shared.server.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Unavailable skips tb with reason, or fails it when [EnvRequire] is set.
func Unavailable(tb testing.TB, reason error) {
	tb.Helper()
	proctest.Unavailable(tb, EnvRequire, fmt.Errorf("PostgreSQL: %w (set %s to a server, or install PostgreSQL 15+)", reason, EnvURL))
}

// URL returns the connection string of the test binary's server: [EnvURL] if set, else the
// shared server, started on the first call. If no server can be had it skips or fails tb
// (see [Unavailable]). It is safe for concurrent use.
func URL(tb testing.TB) string {
	tb.Helper()
	u, err := SharedURL()
	if err != nil {
		Unavailable(tb, err)
	}
	return u
}

// SharedURL is [URL] without a testing.TB: it returns [EnvURL] if set, else the
// connection string of the shared server, started on the first call, or the reason no
// server can be had. It is safe for concurrent use.
func SharedURL() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.server, shared.err = Start(ctx)
		if shared.err == nil {
			shared.url = shared.server.URL()
		}
	})
	return shared.url, shared.err
}

// Pool returns a pool on the test binary's server, closed when tb ends.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return PoolFor(tb, URL(tb), nil)
}

// PoolFor returns a pool on url, changed by configure if not nil, closed when tb ends.
func PoolFor(tb testing.TB, url string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Private starts a server of tb's own (for tests that crash and restart it), stopped and
// removed when tb ends. It skips or fails tb when PostgreSQL is not installed, even with
// [EnvURL] set: a server the tests did not start is not theirs to crash.
func Private(tb testing.TB) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		Unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// Name returns a fresh table name with prefix, so that tests sharing a server share no
// table.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
