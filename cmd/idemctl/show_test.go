package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

func TestShow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.complete(t, "order-1", map[string]string{"id": "o-1"})
	leaseEnd := e.now.Add(4 * time.Minute).Truncate(time.Millisecond)
	e.claim(t, "order-2", "0123456789abcdef0123456789abcdef", leaseEnd, "payment_charged")
	e.claim(t, "order-3", "fedcba9876543210fedcba9876543210", e.now.Add(-time.Minute), "")
	tenant, err := e.guard.StoredKey(idem.Request{Key: "order-1", Tenant: "sub:alice"})
	require.NoError(t, err)

	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string // in stdout, or in stderr when code is not 0
	}{
		{
			name: "completed", args: []string{"--scope", testScope, "--operation", testOperation, "--key", "order-1"},
			contains: []string{"stored key   " + e.key(t, "order-1"), "status       COMPLETED (the stored result is replayed)",
				"result       ", "bytes, json", "owner token  "},
		},
		{
			name: "in progress", args: []string{"--scope", testScope, "--operation", testOperation, "--key", "order-2"},
			contains: []string{"INPROGRESS (lease running", "lease end    " + leaseEnd.UTC().Format(time.RFC3339Nano) + " (in 4m0s)",
				"owner token  01234567…", "checkpoint   payment_charged", "result       none"},
		},
		{
			name: "lease ended", args: []string{"--scope", testScope, "--operation", testOperation, "--key", "order-3"},
			contains: []string{"lease ended, nobody retried", "(1m0s ago)", "owner token  fedcba98…", "checkpoint   none"},
		},
		{
			name: "by stored key", args: []string{"--stored-key", e.key(t, "order-2")},
			contains: []string{"checkpoint   payment_charged"},
		},
		{
			name: "by store URL", args: []string{"--store", "dynamodb://" + e.table, "--scope", testScope, "--operation", testOperation, "--key", "order-2"},
			contains: []string{"checkpoint   payment_charged"},
		},
		{
			name: "another tenant's key is another record", args: []string{"--scope", testScope, "--operation", testOperation, "--key", "order-1", "--tenant", "sub:alice"},
			code: exitNotFound, contains: []string{"no record under " + tenant},
		},
		{
			name: "another scope", args: []string{"--scope", "other", "--operation", testOperation, "--key", "order-1"},
			code: exitNotFound, contains: []string{"no record under other." + testOperation + "#"},
		},
		{
			name: "another operation", args: []string{"--scope", testScope, "--operation", "cancel-order", "--key", "order-1"},
			code: exitNotFound, contains: []string{"no record under " + testScope + ".cancel-order#"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.run(t, e.client, nil, false, append([]string{"show"}, tc.args...)...)
			require.Equal(t, tc.code, r.code, r.stderr)
			out := r.stdout
			if tc.code != exitOK {
				out = r.stderr
				assert.Empty(t, r.stdout)
			}
			for _, s := range tc.contains {
				assert.Contains(t, out, s)
			}
			// Only a prefix of a lease token is ever printed.
			assert.NotContains(t, out, "0123456789abcdef0123456789abcdef")
		})
	}
}

// TestShowJSON shows a completed record as JSON; a result too large for the record's item,
// kept in an item of its own, shows as the stored result it is.
func TestShowJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result map[string]string
	}{
		{"small result", map[string]string{"id": "o-1"}},
		{"result kept apart", map[string]string{"id": "o-1", "lines": incompressible(20 << 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.complete(t, "order-1", tc.result)
			r := e.run(t, e.client, nil, false, "show", "--json", "--scope", testScope, "--operation", testOperation, "--key", "order-1")
			require.Equal(t, exitOK, r.code, r.stderr)
			var v view
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
			rec := e.get(t, "order-1")
			assert.Equal(t, e.key(t, "order-1"), v.StoredKey)
			assert.Equal(t, "COMPLETED", v.Status)
			assert.Equal(t, stateCompleted, v.State)
			assert.Equal(t, rec.LeaseToken[:tokenPrefix], v.OwnerToken)
			assert.Len(t, v.Fingerprint, tokenPrefix)
			assert.NotZero(t, v.ResultBytes)
			assert.Equal(t, len(rec.Data), v.ResultBytes)
			assert.Contains(t, v.Encoding, "json")
			require.NotNil(t, v.Expires)
			assert.True(t, rec.Expires.Equal(*v.Expires))
			assert.Nil(t, v.LeaseEnd)
			assert.Equal(t, idemstore.SchemaVersion, v.Version)
		})
	}
}
