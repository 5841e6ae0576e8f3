package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/redisstore"
	"github.com/idemkit/idem/redisstore/internal/redistest"
)

// The clients the store documents must keep satisfying the interface it declares.
var (
	_ redisstore.Client = (*redis.Client)(nil)
	_ redisstore.Client = (*redis.ClusterClient)(nil)
	_ redisstore.Client = (*redis.Ring)(nil)
	_ redisstore.Client = redis.UniversalClient(nil)
)

// env is the test binary's Redis server.
var env redistest.Env

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the fault tests make many on purpose, and check
	// the errors the store returns instead.
	redis.SetLogger(quiet{})
	os.Exit(env.Main(m))
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// prefix returns a key prefix no other test uses, so tests can share one server.
func prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "idemtest:" + hex.EncodeToString(b[:]) + ":"
}

// newStore returns a store over client with a prefix of its own.
func newStore(t testing.TB, client redisstore.Client, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithKeyPrefix(prefix())}, opts...)...)
	require.NoError(t, err)
	return s
}
