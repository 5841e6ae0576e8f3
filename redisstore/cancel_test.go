package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
)

// gate is a TCP proxy in front of the test's Redis server that passes commands at once
// and holds the server's replies while held is set, until release: a command whose
// reply is late, with the real server's reply.
type gate struct {
	addr    string
	mu      sync.Mutex
	held    chan struct{} // closed by release; nil: replies pass
	sent    chan struct{} // a signal per read from a client while held: a command is at the server
	stopped chan struct{}
}

// newGate starts a gate in front of upstream, closed with the test.
func newGate(t *testing.T, upstream string) *gate {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{addr: l.Addr().String(), sent: make(chan struct{}, 64), stopped: make(chan struct{})}
	var conns sync.WaitGroup
	t.Cleanup(func() { close(g.stopped); _ = l.Close(); g.release(); conns.Wait() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			conns.Add(2)
			go func() { // to the server, at once
				defer conns.Done()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if g.holding() != nil {
							select {
							case g.sent <- struct{}{}:
							default:
							}
						}
						_, _ = s.Write(buf[:n])
					}
					if err != nil {
						_ = s.Close()
						return
					}
				}
			}()
			go func() { // to the client, held while the gate is
				defer conns.Done()
				buf := make([]byte, 4096)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if h := g.holding(); h != nil {
							select {
							case <-h:
							case <-g.stopped:
							}
						}
						_, _ = c.Write(buf[:n])
					}
					if err != nil {
						_ = c.Close()
						return
					}
				}
			}()
		}
	}()
	return g
}

func (g *gate) holding() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// hold makes the gate hold replies from now on.
func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(chan struct{})
}

// release lets the held replies through, and every later one.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// TestCancelledCallLeavesNoStaleReply shows the contract of a call whose context ends
// while its command is at the server: the call returns the context's error at once, and
// the connection it used never serves another command with the late reply. The client
// has one connection, so the next command goes on that same connection (when it is
// back in the pool) and must read its own reply, the other key's record, never the
// cancelled command's.
func TestCancelledCallLeavesNoStaleReply(t *testing.T) {
	opts := env.Options(t)
	g := newGate(t, opts.Addr)
	seed := redis.NewClient(opts)
	t.Cleanup(func() { _ = seed.Close() })
	client := redis.NewClient(&redis.Options{Addr: g.addr, PoolSize: 1, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = client.Close() })
	p := prefix()
	s, err := redisstore.New(client, redisstore.WithKeyPrefix(p))
	require.NoError(t, err)
	seeded, err := redisstore.New(seed, redisstore.WithKeyPrefix(p))
	require.NoError(t, err)

	now := time.Now()
	for _, key := range []string{"a", "b"} {
		_, claimed, err := seeded.Claim(context.Background(), inProgress(key, "tok-"+key, now), now)
		require.NoError(t, err)
		require.True(t, claimed)
	}
	// Warm the one connection before holding replies.
	_, err = s.Get(context.Background(), "b")
	require.NoError(t, err)

	g.hold()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := s.Get(ctx, "a"); errc <- err }()
	<-g.sent // the command is at the server; its reply is held
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, idem.ErrStore)
	case <-time.After(time.Minute): // not a timing check: a call that waits for its reply never returns here
		t.Fatal("Get did not return after its context was cancelled")
	}

	g.release() // the late reply (record a) reaches the connection now
	got, err := s.Get(context.Background(), "b")
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "tok-b", got.LeaseToken, "the next command read its own reply")
	_, claimed, err := s.Claim(context.Background(), inProgress("a", "tok-other", now), now)
	require.NoError(t, err)
	assert.False(t, claimed, "a claim on the pool's connection reads its own reply too")
}

// TestGoRedisIgnoresCancellation is why the store runs a command in a goroutine of its
// own when its context can end (Store.await): go-redis, even with ContextTimeoutEnabled,
// takes only a context's deadline into the socket's deadline, and a cancellation does not
// end a command waiting for its reply; the command ends at the client's own read
// timeout instead. Should go-redis start ending commands on cancellation, this test fails,
// and the store could call it directly.
func TestGoRedisIgnoresCancellation(t *testing.T) {
	opts := env.Options(t)
	g := newGate(t, opts.Addr)
	client := redis.NewClient(&redis.Options{Addr: g.addr, PoolSize: 1, MaxRetries: -1, Protocol: 2, DisableIdentity: true,
		ContextTimeoutEnabled: true, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close() })
	require.NoError(t, client.Ping(context.Background()).Err())

	g.hold()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- client.Get(ctx, "absent").Err() }()
	<-g.sent
	cancel()
	err := <-errc
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.Canceled, "go-redis ended the command on cancellation: %v", err)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF), "want the read timeout, got %v", err)
}
