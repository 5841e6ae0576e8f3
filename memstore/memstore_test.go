package memstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

func TestBehaviour(t *testing.T) {
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
		NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
		NewCounter: func(t *testing.T, _ idemstore.Store) (func(context.Context, int, bool) error, func() int) {
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

func TestZeroValue(t *testing.T) {
	var s memstore.Store
	ctx := context.Background()
	rec, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Nil(t, rec, "an empty store has no record")
	assert.Zero(t, s.Len())
	g, err := idem.New(&s, "test")
	require.NoError(t, err)
	runs := 0
	for range 2 {
		v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (int, error) {
			runs++
			return 7, nil
		})
		require.NoError(t, err)
		assert.Equal(t, 7, v)
	}
	assert.Equal(t, 1, runs, "the zero value guards like New's store")
	assert.Equal(t, 1, s.Len())
}
