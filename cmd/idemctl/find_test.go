package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
)

// TestFind finds the records of a raw key (and tenant) under every scope and operation of
// the table, from a Scan of the stored keys and one GetItem per record found, and says what
// it scanned and what that cost. It never prints the raw key.
func TestFind(t *testing.T) {
	t.Parallel()
	const raw = "customer-key-Zq81"
	e := newEnv(t)
	e.now = time.Now()
	e.claim(t, raw, deadToken, e.now.Add(time.Minute), "charged")
	e.complete(t, "order-1", map[string]string{"id": "o-1"})
	other := e.claimUnder(t, "other-fn", "cancel-order", raw)
	tenantKey := e.claimUnderTenant(t, "billing", "refund", "sub:alice", raw)
	// A result kept apart has an item of its own, under the record's key and more.
	e.complete(t, "big", map[string]string{"lines": incompressible(20 << 10)})

	tests := []struct {
		name   string
		args   []string
		code   int
		want   []string // stored keys found, in any order
		stdout []string
		stderr []string
	}{
		{
			name: "every scope", args: []string{"--key", raw},
			want: []string{e.key(t, raw), other},
			stdout: []string{
				"scope        " + testScope + "\noperation    " + testOperation + "\nstored key   " + e.key(t, raw) + "\n",
				"status       INPROGRESS (lease running", "checkpoint   charged",
				"scope        other-fn\noperation    cancel-order\nstored key   " + other + "\n",
			},
			stderr: []string{"found 2 record(s) of the key (tenant none) under 3 key prefix(es): billing.refund, orders-api.create-order, other-fn.cancel-order\n"},
		},
		{
			name: "with the tenant", args: []string{"--key", raw, "--tenant", "sub:alice"},
			want:   []string{tenantKey},
			stdout: []string{"scope        billing\noperation    refund\n"},
			stderr: []string{"found 1 record(s) of the key (tenant sub:alice)"},
		},
		{
			name: "one scope", args: []string{"--key", raw, "--scope", "other-fn"},
			want:   []string{other},
			stderr: []string{"found 1 record(s) of the key (tenant none) under 1 key prefix(es): other-fn.cancel-order\n"},
		},
		{
			name: "not found", args: []string{"--key", "nobody-sent-this"}, code: exitNotFound,
			stderr: []string{"idemctl: not found: no record of the key with tenant none under any of the 3 key prefix(es) in table " + e.table},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &pagedScan{API: e.client}
			r := e.run(t, api, nil, false, append([]string{"find"}, tc.args...)...)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, s := range tc.stdout {
				assert.Contains(t, r.stdout, s)
			}
			for _, s := range tc.stderr {
				assert.Contains(t, r.stderr, s)
			}
			// What it read: every item of the table, each a page here, and one GetItem per
			// record found; and what that cost, as DynamoDB reported it.
			assert.Regexp(t, `scanned 6 item\(s\) of table `+regexp.QuoteMeta(e.table)+` \([0-9.]+ read units\), then read `+
				strconv.Itoa(len(tc.want))+` record\(s\) \([0-9.]+ read units\)`, r.stderr)
			assert.Equal(t, int32(7), api.pages.Load())
			assert.NotContains(t, r.stdout+r.stderr, tc.args[1], "the raw key is never printed")

			r = e.run(t, e.client, nil, false, append([]string{"find", "--json"}, tc.args...)...)
			require.Equal(t, tc.code, r.code, r.stderr)
			var out finding
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
			var got []string
			for _, m := range out.Records {
				got = append(got, m.StoredKey)
				scope, op := splitPrefix(m.StoredKey[:len(m.StoredKey)-65])
				assert.Equal(t, scope, m.Scope)
				assert.Equal(t, op, m.Operation)
			}
			assert.ElementsMatch(t, tc.want, got)
			assert.Equal(t, int32(6), out.Scanned)
			assert.NotNil(t, out.ScanUnits)
			assert.Equal(t, len(tc.want), out.Reads)
			if len(tc.want) > 0 {
				assert.NotNil(t, out.ReadUnits)
			}
			assert.NotContains(t, r.stdout, tc.args[1])
		})
	}
}

// TestFindUsage refuses a find without a key, or with a bad one, before reading anything.
func TestFindUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no key", nil, "find: name the key with --key (and --tenant, if the wrapper scoped it by the caller)"},
		{"stored key", []string{"--stored-key", "a.b#c"}, "flag provided but not defined: -stored-key"},
		{"operation alone", []string{"--key", "k", "--operation", "create-order"}, "--operation needs --scope"},
		{"key too long", []string{"--key", string(make([]byte, 1025))}, "--key: idem: invalid idempotency key: longer than 1024 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &pagedScan{API: e.client}
			r := e.run(t, api, nil, false, append([]string{"find"}, tc.args...)...)
			assert.Equal(t, exitUsage, r.code)
			assert.Contains(t, r.stderr, tc.stderr)
			assert.Zero(t, api.pages.Load())
		})
	}
}

// claimUnderTenant writes an in-progress record of raw from tenant under scope and
// operation, its lease ended a minute ago, and returns its stored key.
func (e *env) claimUnderTenant(t *testing.T, scope, operation, tenant, raw string) string {
	t.Helper()
	g, err := idem.New(e.store, operation, idem.WithScope(scope))
	require.NoError(t, err)
	key, err := g.StoredKey(idem.Request{Key: raw, Tenant: tenant})
	require.NoError(t, err)
	_, claimed, err := e.store.Claim(context.Background(), &idemstore.Record{Key: key, Status: idemstore.StatusInProgress,
		LeaseToken: "tenant" + operation, LeaseExpires: e.now.Add(-time.Minute), Expires: e.now.Add(time.Hour),
		Version: idemstore.SchemaVersion}, e.now)
	require.NoError(t, err)
	require.True(t, claimed)
	return key
}

// TestFindCompositeKey finds a record in a table with a composite primary key: only the
// records of the partition named, the record key in the sort key.
func TestFindCompositeKey(t *testing.T) {
	t.Parallel()
	const raw = "customer-key-Zq81"
	e := newEnv(t)
	table := ddblocal.NewTable(t, e.client, dynamo.WithSortKey("sk", "idem"))
	mine, err := dynamo.New(e.client, table, dynamo.WithSortKey("sk", "idem"))
	require.NoError(t, err)
	theirs, err := dynamo.New(e.client, table, dynamo.WithSortKey("sk", "other"))
	require.NoError(t, err)
	key := e.key(t, raw)
	for _, s := range []*dynamo.Store{mine, theirs} {
		_, claimed, err := s.Claim(context.Background(), &idemstore.Record{Key: key, Status: idemstore.StatusInProgress,
			LeaseToken: deadToken, LeaseExpires: e.now.Add(time.Minute), Expires: e.now.Add(time.Hour),
			Version: idemstore.SchemaVersion}, e.now)
		require.NoError(t, err)
		require.True(t, claimed)
	}
	r := e.run(t, e.client, nil, false, "find", "--json", "--table", table, "--sort-key", "sk", "--partition", "idem", "--key", raw)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out finding
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Records, 1, "the record of the other partition is not found")
	assert.Equal(t, key, out.Records[0].StoredKey)
	assert.Equal(t, int32(2), out.Scanned, "the Scan reads the whole table")
	assert.Equal(t, []string{testScope + "." + testOperation}, out.Prefixes)
}
