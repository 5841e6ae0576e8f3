package dynamo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
)

// TestBehaviour runs the shared state-machine suite against DynamoDB Local, through Do
// and through one-request batches (the store's PartiQL batch methods).
func TestBehaviour(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%t", batch), func(t *testing.T) { runBehaviour(t, batch) })
	}
}

func runBehaviour(t *testing.T, batch bool) {
	var (
		mu   sync.Mutex
		envs = map[idemstore.Store]*env{}
	)
	storetest.Run(t, storetest.Harness{
		NewStore: func(t *testing.T) idemstore.Store {
			e := newEnv(t)
			mu.Lock()
			defer mu.Unlock()
			envs[e.store] = e
			return e.store
		},
		NewCounter: func(t *testing.T, store idemstore.Store) (func(context.Context, int, bool) error, func() int) {
			mu.Lock()
			e := envs[store]
			mu.Unlock()
			require.NotNil(t, e, "the counter's store comes from NewStore")
			l := newLedger(t, e.client)
			add := func(ctx context.Context, n int, failCond bool) error {
				return dynamo.Attach(ctx, l.add("acct", n, failCond))
			}
			return add, func() int { return l.balance(t, "acct") }
		},
		Batch: batch,
	})
}
