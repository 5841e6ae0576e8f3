package idem_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

func TestHooks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	rec := func(name string) func(context.Context, idem.Event) {
		return func(_ context.Context, e idem.Event) {
			mu.Lock()
			defer mu.Unlock()
			assert.True(t, strings.HasPrefix(e.Key, "hooks.test#"), "hooks see stored keys only")
			seen[name]++
		}
	}
	faulty := storetest.NewFaulty(memstore.New())
	g, err := idem.New(faulty, "test", idem.WithScope("hooks"), idem.WithHooks(idem.Hooks{
		OnClaimed: rec("claimed"), OnCompleted: rec("completed"), OnReplayed: rec("replayed"),
		OnMismatch: rec("mismatch"), OnReleased: rec("released"), OnStoreError: rec("store"),
		OnInProgress: rec("inprogress"), OnLeaseLost: rec("leaselost"),
	}))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) (int, error) { return 1, nil }
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "a", Fingerprint: []byte("1")}, ok)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "a", Fingerprint: []byte("1")}, ok)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "a", Fingerprint: []byte("2")}, ok)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "b"}, func(context.Context) (int, error) { return 0, errors.New("x") })
	faulty.Fail("claim", errors.New("down"), false)
	_, _, _ = idem.Do(ctx, g, idem.Request{Key: "c"}, ok)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"claimed": 2, "completed": 1, "replayed": 1, "mismatch": 1, "released": 1, "store": 1}, seen)
}
