package idem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// Two operations of one function, each with default options, never share a record: the
// same key runs each operation's handler once (at-most-once issue, path 9).
func TestOperationsNeverShareRecords(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "payments-fn")
	ctx := context.Background()
	store := memstore.New()
	charge, err := idem.New(store, "charge")
	require.NoError(t, err)
	refund, err := idem.New(store, "refund")
	require.NoError(t, err)

	req := idem.Request{Key: "k-1"}
	runs := map[string]int{}
	for range 2 {
		c, _, err := idem.Do(ctx, charge, req, func(context.Context) (string, error) { runs["charge"]++; return "charged", nil })
		require.NoError(t, err)
		assert.Equal(t, "charged", c)
		r, _, err := idem.Do(ctx, refund, req, func(context.Context) (int, error) { runs["refund"]++; return 42, nil })
		require.NoError(t, err)
		assert.Equal(t, 42, r)
	}
	assert.Equal(t, map[string]int{"charge": 1, "refund": 1}, runs)
	assert.Equal(t, 2, store.Len())
}

// Two Lambda functions sharing a table, each with a guard of the same operation and
// default options, never share a record: each function's name scopes its keys.
func TestFunctionsNeverShareRecords(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	guards := map[string]*idem.Guard{}
	for _, fn := range []string{"orders-api", "refunds-api"} {
		t.Setenv("AWS_LAMBDA_FUNCTION_NAME", fn)
		g, err := idem.New(store, "create")
		require.NoError(t, err)
		guards[fn] = g
	}
	runs := map[string]int{}
	for range 2 {
		for fn, g := range guards {
			got, _, err := idem.Do(ctx, g, idem.Request{Key: "k-1"}, func(context.Context) (string, error) { runs[fn]++; return fn, nil })
			require.NoError(t, err)
			assert.Equal(t, fn, got, "no replay of another function's result")
		}
	}
	assert.Equal(t, map[string]int{"orders-api": 1, "refunds-api": 1}, runs)
	assert.Equal(t, 2, store.Len())
}

func TestNewRefusesBadOperations(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"", "has space", "has#hash", "has.dot", "caf\u00e9", string(make([]byte, idem.MaxOperationLength+1))} {
		_, err := idem.New(memstore.New(), op)
		assert.Error(t, err, "%q", op)
	}
	_, err := idem.New(memstore.New(), "orders_create-v2")
	assert.NoError(t, err)
}

func TestKeys(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("orders"))
	require.NoError(t, err)
	cases := []struct {
		name string
		req  idem.Request
		want error
	}{
		{"Empty", idem.Request{}, idem.ErrMissingKey},
		{"TooLong", idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength+1)}, idem.ErrInvalidKey},
		{"Longest", idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength)}, nil},
		{"Binary", idem.Request{Key: "a\x00b\xff"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sk, err := g.StoredKey(tc.req)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(sk, "orders.test#"))
			assert.Len(t, sk, len("orders.test#")+64)
			assert.NotContains(t, sk, tc.req.Key, "raw keys never reach the store")
		})
	}

	a, _ := g.StoredKey(idem.Request{Key: "k", Tenant: "alice"})
	b, _ := g.StoredKey(idem.Request{Key: "k", Tenant: "bob"})
	c, _ := g.StoredKey(idem.Request{Key: "k"})
	d, _ := g.StoredKey(idem.Request{Key: "ek", Tenant: "alic"})
	assert.NotEqual(t, a, b, "tenants never share a record")
	assert.NotEqual(t, a, c)
	assert.NotEqual(t, a, d, "tenant and key cannot be shifted into each other")
}

// TestScopeAndOperationNeverShareAKey: the stored key is "<scope>.<operation>#<hash>", so
// a '.' in the operation would let two guards of different scopes and operations (scope
// "a" with operation "b.test", scope "a.b" with "test") share every record, and one
// replay the other's results. The operation may not hold a '.'.
func TestScopeAndOperationNeverShareAKey(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	_, err := idem.New(store, "b.test", idem.WithScope("a"))
	require.ErrorIs(t, err, idem.ErrInvalidOption, "an operation with a '.' is refused")
	g1, err := idem.New(store, "b-test", idem.WithScope("a"))
	require.NoError(t, err)
	g2, err := idem.New(store, "test", idem.WithScope("a.b"))
	require.NoError(t, err)
	k1, err := g1.StoredKey(idem.Request{Key: "k"})
	require.NoError(t, err)
	k2, err := g2.StoredKey(idem.Request{Key: "k"})
	require.NoError(t, err)
	assert.NotEqual(t, k1, k2)
}
