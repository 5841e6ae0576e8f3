package reliability_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/ddblocal"
)

// TestBadInputCore sends hostile keys, tenants and scopes to idem.Do on DynamoDB Local. Each
// is refused with a typed error and no run, or, where the input is merely unusual, runs
// once and replays; collisions after naive concatenation stay two records.
func TestBadInputCore(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	store := newStore(t, raw, table)
	guard := func(scope string) *idem.Guard {
		g, err := idem.New(store, "test", idem.WithScope(scope))
		require.NoError(t, err)
		return g
	}
	tests := []struct {
		name    string
		scope   string
		req     idem.Request
		wantErr error // nil: runs once, then replays
	}{
		{name: "empty key", req: idem.Request{}, wantErr: idem.ErrMissingKey},
		{name: "empty key with tenant", req: idem.Request{Tenant: "t"}, wantErr: idem.ErrMissingKey},
		{name: "64 KB key", req: idem.Request{Key: strings.Repeat("k", 64<<10)}, wantErr: idem.ErrInvalidKey},
		{name: "key one byte too long", req: idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength+1)}, wantErr: idem.ErrInvalidKey},
		{name: "key of the maximum length", req: idem.Request{Key: strings.Repeat("k", idem.MaxKeyLength)}},
		{name: "NUL bytes in key", req: idem.Request{Key: "a\x00b\x00"}},
		{name: "only NUL", req: idem.Request{Key: "\x00"}},
		{name: "invalid UTF-8 key", req: idem.Request{Key: "\xff\xfe\xfd"}},
		{name: "key of hash characters", req: idem.Request{Key: "#" + strings.Repeat("0", 64)}},
		{name: "huge tenant", req: idem.Request{Key: "k-tenant", Tenant: strings.Repeat("t", 1<<20)}},
		{name: "huge fingerprint", req: idem.Request{Key: "k-fp", Fingerprint: make([]byte, 8<<20)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := guard(cmp.Or(tc.scope, "bad-core"))
			var runs atomic.Int32
			fn := func(context.Context) (string, error) { runs.Add(1); return "ok", nil }
			_, _, err := idem.Do(t.Context(), g, tc.req, fn)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, runs.Load())
				return
			}
			require.NoError(t, err)
			got, replayed, err := idem.Do(t.Context(), g, tc.req, fn)
			require.NoError(t, err)
			assert.True(t, replayed)
			assert.Equal(t, "ok", got)
			assert.EqualValues(t, 1, runs.Load())
		})
	}

	// Scopes that could forge a stored key of another form (scope "a#b" with key "c" would
	// read as scope "a" with key "b#c" once concatenated, and "<key>#result#<token>" names a
	// result's item in the DynamoDB store) or overflow a store's key limits are refused.
	for _, scope := range []string{"x#y", "a#b", "s#result#0123", "a b", "é", strings.Repeat("s", idem.MaxScopeLength+1)} {
		_, err := idem.New(store, "test", idem.WithScope(scope))
		require.ErrorIs(t, err, idem.ErrInvalidOption, "scope %q", scope)
	}

	// Pairs that a naive concatenation of scope, tenant and key would merge.
	collisions := []struct {
		name           string
		scopeA, scopeB string
		a, b           idem.Request
	}{
		{name: "tenant+key shifted", scopeA: "s", scopeB: "s", a: idem.Request{Tenant: "ab", Key: "c"}, b: idem.Request{Tenant: "a", Key: "bc"}},
		{name: "tenant vs none", scopeA: "s", scopeB: "s", a: idem.Request{Tenant: "ab", Key: "c"}, b: idem.Request{Key: "abc"}},
		{name: "length prefix forged in key", scopeA: "s", scopeB: "s",
			a: idem.Request{Tenant: "x", Key: "y"}, b: idem.Request{Key: string(binary.BigEndian.AppendUint64(nil, 1)) + "xy"}},
	}
	for _, tc := range collisions {
		t.Run("collision/"+tc.name, func(t *testing.T) {
			// Not parallel: two cases share request a, whose first run would meet the
			// other's in-flight claim.
			ga, gb := guard(tc.scopeA), guard(tc.scopeB)
			ida, err := ga.StoredKey(tc.a)
			require.NoError(t, err)
			idb, err := gb.StoredKey(tc.b)
			require.NoError(t, err)
			assert.NotEqual(t, ida, idb)
			_, _, err = idem.Do(t.Context(), ga, tc.a, func(context.Context) (string, error) { return "A", nil })
			require.NoError(t, err)
			got, replayed, err := idem.Do(t.Context(), gb, tc.b, func(context.Context) (string, error) { return "B", nil })
			require.NoError(t, err)
			assert.False(t, replayed, "never another's record")
			assert.Equal(t, "B", got)
		})
	}
}

// TestBadRecordsInTable writes records with missing, mistyped or unknown attributes
// straight into the table. A caller of their key gets ErrIncompatibleRecord, or, where the
// record cannot hold the key, a normal run; the handler never runs over a record it cannot
// read.
func TestBadRecordsInTable(t *testing.T) {
	t.Parallel()
	raw := ddblocal.Client(t)
	table := ddblocal.NewTable(t, raw)
	store := newStore(t, raw, table)
	g, err := idem.New(store, "test", idem.WithScope("bad-records"))
	require.NoError(t, err)
	future := func(d time.Duration, unit time.Duration) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(d).UnixNano()/int64(unit), 10)}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	completed := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"status": s("COMPLETED"), "expiration": future(time.Hour, time.Second), "data": s(`"stored"`),
			"enc": s("json"), "v": n("1"), "lease_token": s("t0"),
		}
	}
	edit := func(f func(m map[string]types.AttributeValue)) map[string]types.AttributeValue {
		m := completed()
		f(m)
		return m
	}
	tests := []struct {
		name    string
		item    map[string]types.AttributeValue
		wantErr error // nil: the stored result "stored" replays
	}{
		{name: "well-formed", item: completed()},
		{name: "unknown status", item: edit(func(m map[string]types.AttributeValue) { m["status"] = s("DONE") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "empty status", item: edit(func(m map[string]types.AttributeValue) { m["status"] = s("") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "lower-case status", item: edit(func(m map[string]types.AttributeValue) { m["status"] = s("completed") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "status missing", item: edit(func(m map[string]types.AttributeValue) { delete(m, "status") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "status a number", item: edit(func(m map[string]types.AttributeValue) { m["status"] = n("1") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "schema version from the future", item: edit(func(m map[string]types.AttributeValue) { m["v"] = n("99") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "version a string", item: edit(func(m map[string]types.AttributeValue) { m["v"] = s("1") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "data not JSON", item: edit(func(m map[string]types.AttributeValue) { m["data"] = s("{truncated") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "data a number", item: edit(func(m map[string]types.AttributeValue) { m["data"] = n("7") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "unknown encoding", item: edit(func(m map[string]types.AttributeValue) { m["enc"] = s("rot13") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "gzip encoding over plain data", item: edit(func(m map[string]types.AttributeValue) { m["enc"] = s("json+gzip") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "expiration a string", item: edit(func(m map[string]types.AttributeValue) { m["expiration"] = s("tomorrow") }), wantErr: idem.ErrIncompatibleRecord},
		{name: "in progress, lease end a string", item: edit(func(m map[string]types.AttributeValue) {
			m["status"], m["in_progress_expiration"] = s("INPROGRESS"), s("soon")
		}), wantErr: idem.ErrIncompatibleRecord},
		{name: "in progress without a lease end holds its key", item: edit(func(m map[string]types.AttributeValue) { m["status"] = s("INPROGRESS") }), wantErr: idem.ErrInProgress},
		{name: "expired record is absent", item: edit(func(m map[string]types.AttributeValue) { m["expiration"] = n("1") }), wantErr: errRuns},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "bad-record-" + tc.name
			id, err := g.StoredKey(idem.Request{Key: key})
			require.NoError(t, err)
			tc.item["id"] = s(id)
			_, err = raw.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: tc.item})
			require.NoError(t, err)
			var runs atomic.Int32
			got, _, err := idem.Do(t.Context(), g, idem.Request{Key: key}, func(context.Context) (string, error) {
				runs.Add(1)
				return "ran", nil
			})
			switch {
			case tc.wantErr == nil:
				require.NoError(t, err)
				assert.Equal(t, "stored", got)
				assert.Zero(t, runs.Load())
			case errors.Is(tc.wantErr, errRuns):
				require.NoError(t, err)
				assert.Equal(t, "ran", got)
				assert.EqualValues(t, 1, runs.Load())
			default:
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, runs.Load(), "no run over a record that cannot be read")
			}
		})
	}
}

// errRuns marks a bad-record case in which the record does not hold the key.
var errRuns = &idem.StoreError{Op: "none"}
