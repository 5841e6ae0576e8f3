package pgstore_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// wire counts round trips on the network: a write of the client after it read (or
// first) begins one. Pipelined statements are one; a statement pgx prepares first is two.
type wire struct {
	mu      sync.Mutex
	trips   int
	writing bool
}

func (w *wire) take() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.trips
	w.trips = 0
	return n
}

type wireConn struct {
	net.Conn
	w *wire
}

func (c wireConn) Write(b []byte) (int, error) {
	c.w.mu.Lock()
	if !c.w.writing {
		c.w.trips++
		c.w.writing = true
	}
	c.w.mu.Unlock()
	return c.Conn.Write(b)
}

func (c wireConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.w.mu.Lock()
		c.w.writing = false
		c.w.mu.Unlock()
	}
	return n, err
}

// TestWireRoundTrips counts the round trips on the network of a guarded call and of a
// batch of ten, through one connection in each pgx mode, once the connection has
// prepared what it prepares: a new key with an attached write is a claim, BEGIN, the
// completion, the write and COMMIT (its check with it); a batch of ten is one claim,
// one completion (without writes), or BEGIN, one completion, the ten writes and COMMIT.
func TestWireRoundTrips(t *testing.T) {
	t.Parallel()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w := &wire{}
			pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = mode
				c.MaxConns = 1
				dial := c.ConnConfig.DialFunc
				c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
					conn, err := dial(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return wireConn{conn, w}, nil
				}
			})
			s, _ := newStore(t, pool)
			l := newLedger(t, pool)
			g, err := idem.New(s, "wire", idem.WithScope("test"))
			require.NoError(t, err)
			single := func(key string, attach bool) {
				_, _, err := idem.Do(ctx, g, idem.Request{Key: key}, func(ctx context.Context) (out, error) {
					if attach {
						return out{N: 1}, pgstore.Attach(ctx, l.add("acct", 1, false))
					}
					return out{N: 1}, nil
				})
				require.NoError(t, err)
			}
			batch := func(prefix string, attach bool) {
				reqs := make([]idem.Request, 10)
				for i := range reqs {
					reqs[i] = idem.Request{Key: fmt.Sprint(prefix, i)}
				}
				b := g.Claim(ctx, reqs)
				for i := range reqs {
					_, _, err := idem.DoClaimed(ctx, b, i, func(ctx context.Context) (out, error) {
						if attach {
							return out{N: i}, pgstore.Attach(ctx, l.add("acct", 1, false))
						}
						return out{N: i}, nil
					})
					require.NoError(t, err)
				}
				for _, err := range b.Settle(ctx) {
					require.NoError(t, err)
				}
			}
			// Warm up: the connection, and every statement prepared once.
			single("warm-a", true)
			single("warm-b", false)
			batch("warm-c", true)
			batch("warm-d", false)
			w.take()

			single("new", false)
			assert.Equal(t, 2, w.take(), "a new key: claim, completion")
			single("new", false)
			assert.Equal(t, 1, w.take(), "a replay: the claim")
			single("attached", true)
			assert.Equal(t, 5, w.take(), "a new key with a write: claim, BEGIN, completion, write, COMMIT")
			batch("b", false)
			assert.Equal(t, 2, w.take(), "a batch of ten: claims, completions")
			batch("b", false)
			assert.Equal(t, 1, w.take(), "a batch of ten replays: the claims")
			batch("c", true)
			assert.Equal(t, 14, w.take(), "a batch of ten with a write each: claims, BEGIN, completions, ten writes, COMMIT")
		})
	}
}
