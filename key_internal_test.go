package idem

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/memstore"
)

func TestKeyAndTokenShareNothingButTheAllocation(t *testing.T) {
	g, err := New(memstore.New(), "test", WithScope("fn"))
	require.NoError(t, err)
	req := Request{Key: "order-1", Tenant: "t"}
	want, err := g.StoredKey(req)
	require.NoError(t, err)

	seen := make(map[string]bool)
	for range 10_000 {
		key, token, err := g.keyAndToken(req)
		require.NoError(t, err)
		require.Equal(t, want, key)
		require.Len(t, token, 2*tokenBytes)
		_, err = hex.DecodeString(token)
		require.NoError(t, err)
		require.False(t, seen[token], "token repeated")
		seen[token] = true
	}
	_, _, err = g.keyAndToken(Request{})
	require.ErrorIs(t, err, ErrMissingKey)
}
