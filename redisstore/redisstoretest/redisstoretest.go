package redisstoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/redisstore"
	"github.com/idemkit/idem/redisstore/internal/redistest"
)

// Environment variables read by this package.
const (
	// EnvURL names a Redis server to use instead of starting one, as a redis:// URL
	// (redis.ParseURL): redis://127.0.0.1:6379/0, say.
	EnvURL = redistest.EnvURL
	// EnvRequire, when set (to anything), turns a Redis server that cannot be had into a
	// failure: the binary fails at once, and no test skips.
	EnvRequire = redistest.EnvRequire
)

// env is the test binary's server. It is package state on purpose, as dynamotest's: one
// server serves every test of the binary, each with keys of its own.
var env redistest.Env

// Main starts the test binary's Redis server (or takes [EnvURL]), runs the tests, and
// stops the server by its process id; call it from TestMain, before which no test can have
// the server:
//
//	func TestMain(m *testing.M) { os.Exit(redisstoretest.Main(m)) }
//
// When no server can be had, it fails the binary at once with [EnvRequire] set; otherwise
// the tests run, each that asks for the server skips, and the binary's examples are left
// out (as with -skip '^Example'), since an example cannot skip. It returns the exit code
// for os.Exit.
func Main(m *testing.M) int { return env.Main(m) }

// Client returns a new client of the test binary's server, closed when tb ends. It skips
// tb when there is no server, or fails it with [EnvRequire] set or when [Main] did not run.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return env.Client(tb)
}

// NewStore returns a [redisstore.Store] on the test binary's server (see [Client]) whose
// keys have a prefix of their own, "idemtest:<random hex>:", so that no other test meets
// its records; the keys under it are deleted when tb ends. opts go to [redisstore.New]
// before the prefix, so a [redisstore.WithKeyPrefix] among them has no effect. It fails tb
// on error.
func NewStore(tb testing.TB, opts ...redisstore.Option) *redisstore.Store {
	tb.Helper()
	client := Client(tb)
	prefix := newPrefix()
	store, err := redisstore.New(client, append(opts, redisstore.WithKeyPrefix(prefix))...)
	if err != nil {
		tb.Fatalf("redisstoretest: %v", err)
	}
	// Registered after Client's, so it runs before the client is closed.
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := deletePrefix(ctx, client, prefix); err != nil {
			tb.Errorf("redisstoretest: delete keys %s*: %v", prefix, err)
		}
	})
	return store
}

// newPrefix returns a key prefix no other test uses. It holds no glob character, so SCAN
// MATCH prefix* finds its keys and no others.
func newPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "idemtest:" + hex.EncodeToString(b[:]) + ":"
}

// deletePrefix deletes every key under prefix.
func deletePrefix(ctx context.Context, client *redis.Client, prefix string) error {
	iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	return client.Del(ctx, keys...).Err()
}
