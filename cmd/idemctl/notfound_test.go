package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNotFoundHint: a key with no record exits 3 and says, on stderr after the error, the
// scope, operation and tenant it looked under and the commands to try next. It never
// prints the raw key.
func TestNotFoundHint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const raw = "customer-key-Zq81"
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "show by key",
			args: []string{"show", "--scope", testScope, "--operation", testOperation, "--key", raw},
			want: []string{
				"idemctl: not found: no record under " + e.key(t, raw) + " in table " + e.table + "\n",
				"Looked under scope orders-api, operation create-order, tenant none (the raw key is not printed).\n",
				"Check: the scope is the function's name unless the guard sets idem.WithScope;",
				"the operation is the name given to idem.New;",
				"the HTTP wrappers scope the key of an authenticated caller by its identity (--tenant sub:…, iam:arn:…).\n",
				"Try:   idemctl find --key \"$KEY\" [--tenant T]   the key under every scope and operation (a Scan)\n",
				"       idemctl list --scope orders-api   the scope's in-progress records (a Scan)\n",
			},
		},
		{
			name: "release by key and tenant",
			args: []string{"release", "--yes", "--scope", "fn.v2", "--operation", "refund", "--key", raw, "--tenant", "sub:alice"},
			want: []string{
				"Looked under scope fn.v2, operation refund, tenant sub:alice (the raw key is not printed).\n",
				"idemctl list --scope fn.v2   the scope's",
			},
		},
		{
			name: "delete by stored key",
			args: []string{"delete", "--yes", "--stored-key", "fn.v2.refund#abc"},
			want: []string{
				"idemctl: not found: no record under fn.v2.refund#abc in table " + e.table + "\n",
				"Looked under the stored key as given: scope fn.v2, operation refund.\n",
				"idemctl list --scope fn.v2   the scope's in-progress records (a Scan)\n",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.run(t, e.client, nil, false, tc.args...)
			require.Equal(t, exitNotFound, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			for _, s := range tc.want {
				assert.Contains(t, r.stderr, s)
			}
			assert.NotContains(t, r.stderr, raw)
		})
	}
}
