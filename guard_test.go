package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/storetest"
)

func TestMemStoreBehaviour(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "Do"
		if batch {
			name = "Batch"
		}
		t.Run(name, func(t *testing.T) { storetest.Run(t, memHarness(batch)) })
	}
}

func memHarness(batch bool) storetest.Harness {
	return storetest.Harness{
		Batch:    batch,
		NewStore: func(*testing.T) idem.Store { return idem.NewMemStore() },
		NewCounter: func(t *testing.T, _ idem.Store) (func(context.Context, int, bool) error, func() int) {
			var total atomic.Int64
			add := func(ctx context.Context, n int, failCond bool) error {
				return idem.Attach(ctx, func() error {
					if failCond {
						return errors.New("balance condition failed")
					}
					total.Add(int64(n))
					return nil
				})
			}
			return add, func() int { return int(total.Load()) }
		},
	}
}
