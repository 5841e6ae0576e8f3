// Package redistest starts the Redis servers the redisstore tests run against: redis-server
// (7 or newer) on 127.0.0.1 at a free port (by internal/redisserver), without persistence
// unless asked, stopped by process id; or the server REDIS_URL names. It also starts small
// local clusters.
package redistest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/redisserver"
)

// Server is one redis-server process started on 127.0.0.1: see [redisserver.Server].
type Server = redisserver.Server

// Start starts redis-server on a free port of 127.0.0.1: see [redisserver.Start].
func Start(ctx context.Context, extra ...string) (*Server, error) {
	return redisserver.Start(ctx, extra...)
}

// EnvURL names a Redis server to run the tests against instead of starting one, as a
// redis:// URL (redis.ParseURL). Its database is shared with whatever else uses it: the
// tests use keys of their own, with random suffixes, and delete none but those.
const EnvURL = "REDIS_URL"

// EnvRequire names the variable that makes the Redis tests required. When it is set (make
// test sets it), a Redis server that cannot be had fails the tests instead of skipping them.
const EnvRequire = "IDEM_REQUIRE_REDIS"

// shared is the test binary's server, started by [Main].
type shared struct {
	opts   *redis.Options
	server *Server
	err    error
}

// Env is the Redis server of one test binary, made by [Main].
type Env struct {
	mu sync.Mutex
	s  shared
}

// Main starts the test binary's Redis server (or takes REDIS_URL), runs the tests, and
// stops the server by process id; call it from TestMain:
//
//	var env redistest.Env
//	func TestMain(m *testing.M) { os.Exit(env.Main(m)) }
//
// When no server can be had, the binary fails at once with [EnvRequire] set, and otherwise
// runs, with every test that asks for the server skipped with the reason and the examples
// left out (an example cannot skip). Main returns the exit code for os.Exit.
func (e *Env) Main(m *testing.M) int {
	flag.Parse()
	if url := os.Getenv(EnvURL); url != "" {
		e.s.opts, e.s.err = redis.ParseURL(url)
	} else {
		e.s.server, e.s.err = Start(context.Background())
		if e.s.err == nil {
			e.s.opts = &redis.Options{Addr: e.s.server.Addr}
		}
	}
	if e.s.err == nil {
		e.s.err = CheckVersion(context.Background(), e.s.opts)
	}
	if e.s.err != nil && os.Getenv(EnvRequire) != "" {
		fmt.Fprintf(os.Stderr, "redistest: no Redis server, and %s is set: %v\n", EnvRequire, e.s.err)
		return 1
	}
	if e.s.err != nil {
		// Tests skip; an example cannot, and would fail its output.
		proctest.LeaveOutExamples()
		fmt.Fprintf(os.Stderr, "redistest: no Redis server, so the examples are left out: %v\n", e.s.err)
	}
	code := m.Run()
	if e.s.server != nil {
		if err := e.s.server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Options returns a copy of the client options for the binary's server. It skips tb (or,
// with [EnvRequire] set, fails it) when there is none.
func (e *Env) Options(tb testing.TB) *redis.Options {
	tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s.err != nil || e.s.opts == nil {
		err := e.s.err
		if err == nil {
			err = fmt.Errorf("redistest: Env.Main did not run: call it from TestMain")
		}
		e.unavailable(tb, fmt.Errorf("no Redis server (set %s, or install redis-server): %w", EnvURL, err))
	}
	o := *e.s.opts
	return &o
}

// Client returns a new client of the binary's server, closed when tb ends (see
// [Env.Options] for when it skips).
func (e *Env) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(e.Options(tb))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Own reports whether the binary started its server itself (rather than using REDIS_URL),
// so that a test may start servers of its own beside it (cluster, kill and restart).
func (e *Env) Own() bool { return e.s.server != nil }

// MinMajorVersion is the oldest Redis major version the tests accept.
const MinMajorVersion = 7

// CheckVersion returns an error unless the server opts names runs Redis (or Valkey) 7 or
// newer.
func CheckVersion(ctx context.Context, opts *redis.Options) error {
	c := redis.NewClient(opts)
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redistest: INFO server: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			if n, err := strconv.Atoi(major); err != nil || n < MinMajorVersion {
				return fmt.Errorf("redistest: server runs Redis %s, the tests need %d or newer", v, MinMajorVersion)
			}
			return nil
		}
	}
	return errors.New("redistest: INFO server has no redis_version")
}
