package redisstore_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
)

// counter is a go-redis hook that counts the commands a client sends, by name, each
// Process call one round trip (a pipeline would be one round trip of many commands).
type counter struct {
	mu    sync.Mutex
	names []string
	cmds  int // commands sent in pipelines since the last piped
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, strings.ToLower(cmd.Name()))
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, "pipeline")
		c.cmds += len(cmds)
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the commands counted since the last take and starts over.
func (c *counter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// piped returns the commands sent in pipelines since the last call, and starts over.
func (c *counter) piped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.cmds
	c.cmds = 0
	return n
}

// countedClient returns a client of the test server whose commands c counts.
func countedClient(t *testing.T) (*redis.Client, *counter) {
	t.Helper()
	client := env.Client(t)
	c := &counter{}
	client.AddHook(c)
	return client, c
}

// TestRoundTrips counts the commands of each store operation: every state change is one
// script (EVALSHA once the server has the script), a get one HGETALL.
func TestRoundTrips(t *testing.T) {
	client, c := countedClient(t)
	s := newStore(t, client)
	ctx := context.Background()
	now := time.Now()
	claim := func(key, token, checkpoint string) *idemstore.Record {
		return &idemstore.Record{Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
			LeaseExpires: now.Add(time.Minute), LeaseToken: token, Checkpoint: checkpoint, Version: idemstore.SchemaVersion}
	}
	completed := func(rec *idemstore.Record) *idemstore.Record {
		done := *rec
		done.Status, done.Data, done.Encoding, done.LeaseExpires = idemstore.StatusCompleted, []byte(`{"n":1}`), "json", time.Time{}
		return &done
	}
	// Load every script once, so the counts below are those of a warm server.
	warm := claim("warm", "t0", "")
	_, _, err := s.Claim(ctx, warm, now)
	require.NoError(t, err)
	require.NoError(t, s.SetCheckpoint(ctx, "warm", "t0", "cp", 1))
	require.NoError(t, s.Extend(ctx, "warm", "t0", now.Add(2*time.Minute)))
	require.NoError(t, s.Release(ctx, "warm", "t0", now))
	_, _, err = s.Claim(ctx, claim("warm2", "t1", ""), now)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, completed(claim("warm2", "t1", "")), nil))
	c.take()

	cases := []struct {
		name string
		op   func(t *testing.T)
		want []string
	}{
		{"ClaimNew", func(t *testing.T) {
			_, claimed, err := s.Claim(ctx, claim("a", "ta", ""), now)
			require.NoError(t, err)
			require.True(t, claimed)
		}, []string{"evalsha"}},
		{"ClaimRefusedReturnsRecord", func(t *testing.T) {
			prev, claimed, err := s.Claim(ctx, claim("a", "tb", ""), now)
			require.NoError(t, err)
			require.False(t, claimed)
			require.NotNil(t, prev)
			assert.Equal(t, "ta", prev.LeaseToken)
		}, []string{"evalsha"}},
		{"SetCheckpoint", func(t *testing.T) { require.NoError(t, s.SetCheckpoint(ctx, "a", "ta", "charged", 1)) }, []string{"evalsha"}},
		{"Extend", func(t *testing.T) { require.NoError(t, s.Extend(ctx, "a", "ta", now.Add(5*time.Minute))) }, []string{"evalsha"}},
		{"ReleaseWithCheckpoint", func(t *testing.T) { require.NoError(t, s.Release(ctx, "a", "ta", now)) }, []string{"evalsha"}},
		{"ClaimTakeover", func(t *testing.T) {
			rec := claim("a", "tc", "charged")
			rec.CheckpointSeq = 1 // the checkpoint's number, as the guard carries it
			_, claimed, err := s.Claim(ctx, rec, now)
			require.NoError(t, err)
			require.True(t, claimed)
		}, []string{"evalsha"}},
		{"Complete", func(t *testing.T) { require.NoError(t, s.Complete(ctx, completed(claim("a", "tc", "")), nil)) }, []string{"evalsha"}},
		{"CompleteResent", func(t *testing.T) { require.NoError(t, s.Complete(ctx, completed(claim("a", "tc", "")), nil)) }, []string{"evalsha"}},
		{"CompleteLeaseLost", func(t *testing.T) {
			require.ErrorIs(t, s.Complete(ctx, completed(claim("a", "other", "")), nil), idem.ErrLeaseLost)
		}, []string{"evalsha"}},
		{"Get", func(t *testing.T) {
			rec, err := s.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusCompleted, rec.Status)
		}, []string{"hgetall"}},
		{"ReleaseWithoutCheckpoint", func(t *testing.T) {
			_, _, err := s.Claim(ctx, claim("b", "tb", ""), now)
			require.NoError(t, err)
			c.take()
			require.NoError(t, s.Release(ctx, "b", "tb", now))
		}, []string{"evalsha"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.op(t)
			assert.Equal(t, tc.want, c.take())
		})
	}
}

// TestRoundTripsCold shows the one extra round trip of a script the server does not have
// yet (after a restart or SCRIPT FLUSH): EVALSHA answers NOSCRIPT, EVAL sends the script,
// and the next call is one EVALSHA again.
func TestRoundTripsCold(t *testing.T) {
	srv := env.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	c := &counter{}
	client.AddHook(c)
	s := newStore(t, client)
	ctx := context.Background()
	require.NoError(t, client.Ping(ctx).Err()) // the connection's handshake, not counted
	c.take()
	now := time.Now()
	rec := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute), LeaseToken: "t", Version: idemstore.SchemaVersion}
	_, _, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, []string{"evalsha", "eval"}, c.take())
	_, _, err = s.Claim(ctx, rec, now)
	require.NoError(t, err)
	assert.Equal(t, []string{"evalsha"}, c.take())
}

// TestGuardRoundTrips counts the commands of the guard's paths on this store: a new key
// is two (claim, complete), a replay one, an in-flight duplicate one, a handler error two
// (claim, release).
func TestGuardRoundTrips(t *testing.T) {
	client, c := countedClient(t)
	clock := storetest.NewClock()
	g, err := idem.New(newStore(t, client), "roundtrips", idem.WithClock(clock), idem.WithScope("rt"))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) (int, error) { return 1, nil }
	// Warm the scripts.
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "warm"}, ok)
	require.NoError(t, err)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "warm-fail"}, func(context.Context) (int, error) { return 0, assert.AnError })
	c.take()

	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "new"}, ok)
	require.NoError(t, err)
	require.False(t, replayed)
	assert.Equal(t, []string{"evalsha", "evalsha"}, c.take(), "new key: claim and complete")

	_, replayed, err = idem.Do(ctx, g, idem.Request{Key: "new"}, ok)
	require.NoError(t, err)
	require.True(t, replayed)
	assert.Equal(t, []string{"evalsha"}, c.take(), "replay: one refused claim")

	_, _, err = idem.Do(ctx, g, idem.Request{Key: "fails"}, func(context.Context) (int, error) { return 0, assert.AnError })
	require.ErrorIs(t, err, assert.AnError)
	assert.Equal(t, []string{"evalsha", "evalsha"}, c.take(), "handler error: claim and release")

	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := idem.Do(ctx, g, idem.Request{Key: "busy"}, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
		done <- err
	}()
	<-started
	c.take()
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "busy"}, ok)
	require.ErrorIs(t, err, idem.ErrInProgress)
	assert.Equal(t, []string{"evalsha"}, c.take(), "in-flight duplicate: one refused claim")
	close(release)
	require.NoError(t, <-done)
}

// TestContextEndsCall shows that an operation returns once its context ends, even when
// the server never answers: go-redis waits for the answer until its read timeout (here
// none), and the guard waits for a cancelled extension before it records the outcome.
func TestContextEndsCall(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	var conns sync.WaitGroup
	hold := make(chan struct{})
	received := make(chan struct{}, 64) // a signal per read: the command is at the server
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { // reads every command, answers none
				defer conns.Done()
				go func() { <-hold; _ = conn.Close() }()
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
					select {
					case received <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	client := redis.NewClient(&redis.Options{Addr: l.Addr().String(), ReadTimeout: -1, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { close(hold); _ = client.Close(); conns.Wait() })
	s := newStore(t, client)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Extend(ctx, "k", "t", time.Now().Add(time.Minute)) }()
	<-received // the command was sent: only the answer is awaited
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, idem.ErrStore)
	case <-time.After(time.Minute): // not a timing check: without the fix it never returns
		t.Fatal("Extend did not return after its context was cancelled")
	}
}
