package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
)

// TestBehaviour runs the shared state-machine suite against a real Redis, through Do and
// through one-request batches. NewCounter stays nil: the store supports no attached writes
// (see TestAttachRefused), so the suite's transactional part does not apply.
func TestBehaviour(t *testing.T) {
	client := env.Client(t)
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%t", batch), func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				NewStore: func(t *testing.T) idemstore.Store { return newStore(t, client) },
				Batch:    batch,
			})
		})
	}
}

// TestBehaviourCluster runs the suite against a local Redis Cluster of three masters,
// through Do and through one-request batches: every script touches only its record's key,
// so it runs on the key's slot, whichever node holds it, and a batch's pipeline goes to
// each node with the scripts of its keys (see TestBatchCluster).
func TestBehaviourCluster(t *testing.T) {
	c := env.StartCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = client.Close() })
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%t", batch), func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				NewStore: func(t *testing.T) idemstore.Store { return newStore(t, client) },
				Batch:    batch,
			})
		})
	}
}
