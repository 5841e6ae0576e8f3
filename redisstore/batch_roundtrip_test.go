package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// batchOf returns n requests on fresh keys named after prefix.
func batchOf(prefix string, n int) []idem.Request {
	reqs := make([]idem.Request, n)
	for i := range reqs {
		reqs[i] = idem.Request{Key: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return reqs
}

// runBatch claims reqs with one guard batch, runs each with fn, settles, and returns how
// many handlers ran and the requests that failed.
func runBatch(t *testing.T, g *idem.Guard, reqs []idem.Request, fn func(context.Context) (int, error)) (ran int, failed []int) {
	t.Helper()
	// A deadline, as Lambda sets one: without it DoClaimed records each outcome at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := g.Claim(ctx, reqs)
	for i := range reqs {
		_, replayed, err := idem.DoClaimed(ctx, b, i, fn)
		if err == nil && !replayed {
			ran++
		}
		if err != nil && !errors.Is(err, assert.AnError) {
			failed = append(failed, i)
		}
	}
	for i, err := range b.Settle(ctx) {
		if err != nil {
			failed = append(failed, i)
		}
	}
	return ran, failed
}

// TestBatchGuardRoundTrips counts the round trips of the guard's batches on this store
// (idem.Guard.Claim, DoClaimed, Settle): a batch of N new keys is one pipeline of claims and
// one of completions; the same batch again (every key completed) is one pipeline; a batch
// whose handlers fail is one of claims and one of releases. Each pipeline carries one
// EVALSHA per record.
func TestBatchGuardRoundTrips(t *testing.T) {
	client, c := countedClient(t)
	g, err := idem.New(newStore(t, client), "batch", idem.WithScope("rt"))
	require.NoError(t, err)
	ok := func(context.Context) (int, error) { return 1, nil }
	fails := func(context.Context) (int, error) { return 0, assert.AnError }
	// Warm the scripts.
	_, failed := runBatch(t, g, batchOf("warm", 2), ok)
	require.Empty(t, failed)
	_, _ = runBatch(t, g, batchOf("warm-fail", 2), fails)
	c.take()
	c.piped()

	for _, n := range []int{2, 10, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			reqs := batchOf(fmt.Sprintf("new%d", n), n)
			ran, failed := runBatch(t, g, reqs, ok)
			require.Empty(t, failed)
			assert.Equal(t, n, ran)
			assert.Equal(t, []string{"pipeline", "pipeline"}, c.take(), "new keys: claims, completions")
			assert.Equal(t, 2*n, c.piped(), "an EVALSHA per record and step")

			ran, failed = runBatch(t, g, reqs, ok)
			require.Empty(t, failed)
			assert.Zero(t, ran)
			assert.Equal(t, []string{"pipeline"}, c.take(), "redelivered: one pipeline of refused claims")
			assert.Equal(t, n, c.piped())

			ran, _ = runBatch(t, g, batchOf(fmt.Sprintf("fail%d", n), n), fails)
			assert.Zero(t, ran)
			assert.Equal(t, []string{"pipeline", "pipeline"}, c.take(), "failed handlers: claims, releases")
			assert.Equal(t, 2*n, c.piped())
		})
	}
}

// TestBatchGuardRoundTripsCold shows the one extra round trip of a batch on a server that
// does not have the scripts yet: the pipeline of EVALSHA is refused (NOSCRIPT) and sent
// again as EVAL, as a single script is.
func TestBatchGuardRoundTripsCold(t *testing.T) {
	srv := env.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	c := &counter{}
	client.AddHook(c)
	g, err := idem.New(newStore(t, client), "batch", idem.WithScope("rt"))
	require.NoError(t, err)
	require.NoError(t, client.Ping(context.Background()).Err()) // the handshake, not counted
	c.take()
	ran, failed := runBatch(t, g, batchOf("cold", 10), func(context.Context) (int, error) { return 1, nil })
	require.Empty(t, failed)
	assert.Equal(t, 10, ran)
	assert.Equal(t, []string{"pipeline", "pipeline", "pipeline", "pipeline"}, c.take(),
		"claims refused by NOSCRIPT, claims with EVAL, completions refused, completions with EVAL")
	ran, failed = runBatch(t, g, batchOf("warm", 10), func(context.Context) (int, error) { return 1, nil })
	require.Empty(t, failed)
	assert.Equal(t, 10, ran)
	assert.Equal(t, []string{"pipeline", "pipeline"}, c.take())
}

// TestBatchCluster runs batches on a local Redis Cluster of three masters: the client
// sends one pipeline to each node that holds some of the batch's keys (at most three per
// step, concurrently), never a cross-slot script, and every key's outcome is right.
func TestBatchCluster(t *testing.T) {
	cl := env.StartCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = client.Close() })
	c := &counter{}
	client.OnNewNode(func(node *redis.Client) { node.AddHook(c) }) // counts each node's pipelines
	g, err := idem.New(newStore(t, client), "batch", idem.WithScope("cluster"))
	require.NoError(t, err)
	ok := func(context.Context) (int, error) { return 1, nil }
	_, failed := runBatch(t, g, batchOf("warm", 30), ok) // every node loads the scripts
	require.Empty(t, failed)
	c.take()
	c.piped()

	reqs := batchOf("new", 30)
	ran, failed := runBatch(t, g, reqs, ok)
	require.Empty(t, failed)
	assert.Equal(t, 30, ran)
	assert.Equal(t, []string{"pipeline", "pipeline", "pipeline", "pipeline", "pipeline", "pipeline"}, c.take(),
		"30 keys spread over 3 nodes: a pipeline per node for the claims, one per node for the completions")
	assert.Equal(t, 60, c.piped())

	ran, failed = runBatch(t, g, reqs, ok)
	require.Empty(t, failed)
	assert.Zero(t, ran, "redelivered: every key replays")
	assert.Equal(t, []string{"pipeline", "pipeline", "pipeline"}, c.take())
}
