package dynamo_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"slices"
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
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/internal/ddbfault"
	"github.com/idemkit/idem/internal/ddblocal"
)

// These tests pin how a result too large for a 1 KB record is kept: in an item of its own,
// "<key>#result#<lease token>", which the completed record names in its data_ref attribute
// (schema version 2), so that a claim meeting the record conflicts on a small item and a
// replay pays one write unit and the read of the result.

// bodyKey is the key of the item holding the result of key's record written under token:
// "<key>#result#<token>" for a token of the guard's form (32 lowercase hex digits), with a
// hash of the token in its place otherwise.
func bodyKey(key, token string) string { return dynamo.ResultKey(key, token) }

// itemKey is the primary key of key's item in the default layout.
func itemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}}
}

// bigData returns n bytes of result data that do not compress, as the guard would store
// them after gzip.
func bigData(n int) []byte {
	b := []byte(randomJSONText(n))
	return b
}

// randomJSONText returns a JSON string literal of about n bytes of printable,
// incompressible text.
func randomJSONText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 0, n)
	b = append(b, '"')
	x := uint64(88172645463325252)
	for len(b) < n-1 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b = append(b, alphabet[x%uint64(len(alphabet))])
	}
	return string(append(b, '"'))
}

// completedWith returns the completion of rec with data as a plain JSON result.
func completedWith(rec *idemstore.Record, data []byte) *idemstore.Record {
	done := *rec
	done.Status, done.LeaseExpires, done.Data, done.Encoding = idemstore.StatusCompleted, time.Time{}, data, "json"
	return &done
}

func attrS(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func attrN(t *testing.T, item map[string]types.AttributeValue, name string) int64 {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberN)
	require.True(t, ok, "attribute %q is a number", name)
	n, err := strconv.ParseInt(v.Value, 10, 64)
	require.NoError(t, err)
	return n
}

// TestResultStoredApart checks where a completed result lands, by its size: inline in a
// record that stays under 1 KB, else in its own item that the record names, with the TTL
// of the record (and the record then at schema version 2, which older readers refuse
// rather than replay it without its body). Either way Get returns the whole record.
func TestResultStoredApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	cases := []struct {
		name  string
		data  []byte
		apart bool
	}{
		{"100B", bigData(100), false},
		{"600B", bigData(600), false},
		{"2KB", bigData(2 << 10), true},
		{"50KB", bigData(50 << 10), true},
		{"300KB", bigData(300 << 10), true},
		{"390KB", bigData(390 << 10), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := record("apart/"+tc.name, now, "tok-"+tc.name)
			rec.Checkpoint = "cp"
			seed(t, e.store, rec)
			done := completedWith(rec, tc.data)
			require.NoError(t, e.store.Complete(ctx, done, nil))

			item := e.rawItem(t, itemKey(rec.Key))
			body := e.rawItem(t, itemKey(bodyKey(rec.Key, rec.LeaseToken)))
			ref, hasRef := attrS(item, "data_ref")
			if tc.apart {
				assert.NotContains(t, item, "data", "the result is not inline")
				assert.True(t, hasRef)
				assert.Equal(t, bodyKey(rec.Key, rec.LeaseToken), ref)
				assert.Equal(t, int64(2), attrN(t, item, "v"), "schema version 2: older readers refuse it")
				assert.LessOrEqual(t, dynamo.ItemSize(item), 1024, "the record stays under 1 KB")
				require.NotEmpty(t, body, "the result's item")
				assert.Equal(t, tc.data, dataBytes(body["data"]))
				assert.GreaterOrEqual(t, attrN(t, body, "expiration"), attrN(t, item, "expiration"),
					"the result's item expires (TTL) no earlier than its record")
				assert.NotContains(t, body, "status", "the result's item is not a record")
			} else {
				assert.Contains(t, item, "data")
				assert.False(t, hasRef)
				assert.Equal(t, int64(1), attrN(t, item, "v"))
				assert.Empty(t, body)
			}
			got, err := e.store.Get(ctx, rec.Key)
			require.NoError(t, err)
			assertSameRecord(t, done, got)
		})
	}
}

// dataBytes returns the bytes of a data attribute, string or binary.
func dataBytes(av types.AttributeValue) []byte {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return []byte(v.Value)
	case *types.AttributeValueMemberB:
		return v.Value
	}
	return nil
}

// TestResultApartFencing covers a late owner: its lease ended and another took the key
// over. Whether the late owner's completion comes before or after the new owner's, the
// record ends up naming the new owner's result, never the late one's, whose item (keyed by
// its own token) is an orphan that TTL removes.
func TestResultApartFencing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	for _, lateFirst := range []bool{true, false} {
		t.Run("lateFirst="+strconv.FormatBool(lateFirst), func(t *testing.T) {
			t.Parallel()
			key := "apart-fencing/" + strconv.FormatBool(lateFirst)
			late := record(key, now, "late")
			late.LeaseExpires = now.Add(-time.Minute)
			seed(t, e.store, late)
			owner := record(key, now, "owner")
			_, claimed, err := e.store.Claim(ctx, owner, now)
			require.NoError(t, err)
			require.True(t, claimed, "the lease ended: taken over")

			lateData, ownerData := bigData(5<<10), bigData(6<<10)
			completeLate := func() {
				err := e.store.Complete(ctx, completedWith(late, lateData), nil)
				require.ErrorIs(t, err, idem.ErrLeaseLost)
			}
			if lateFirst {
				completeLate()
			}
			require.NoError(t, e.store.Complete(ctx, completedWith(owner, ownerData), nil))
			if !lateFirst {
				completeLate()
			}
			got, err := e.store.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, "owner", got.LeaseToken)
			assert.Equal(t, ownerData, got.Data)

			orphan := e.rawItem(t, itemKey(bodyKey(key, "late")))
			if len(orphan) > 0 {
				assert.Contains(t, orphan, "expiration", "an orphan result expires")
			}
		})
	}
}

// TestResultApartCrashBeforeCompletion: the owner wrote its result's item, then its
// completion failed (or it crashed). The record stays in progress and names no result;
// the next owner takes over once the lease ends and its own result is the one kept.
func TestResultApartCrashBeforeCompletion(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	ddblocal.DisableTTL(t, client, table)
	faulty := ddbfault.New(client)
	s, err := dynamo.New(faulty, table)
	require.NoError(t, err)
	e := &env{client: client, table: table, store: s}
	ctx := context.Background()
	now := wallClock()

	rec := record("apart-crash", now, "first")
	seed(t, s, rec)
	faulty.Arm(ddbfault.Complete, ddbfault.ServerError, -1)
	require.ErrorIs(t, s.Complete(ctx, completedWith(rec, bigData(8<<10)), nil), idem.ErrStore)
	faulty.Disarm()

	item := e.rawItem(t, itemKey(rec.Key))
	assert.Equal(t, "INPROGRESS", item["status"].(*types.AttributeValueMemberS).Value)
	assert.NotContains(t, item, "data_ref")

	later := now.Add(2 * time.Minute)
	next := record(rec.Key, later, "second")
	_, claimed, err := s.Claim(ctx, next, later)
	require.NoError(t, err)
	require.True(t, claimed)
	want := bigData(9 << 10)
	require.NoError(t, s.Complete(ctx, completedWith(next, want), nil))
	got, err := s.Get(ctx, rec.Key)
	require.NoError(t, err)
	assert.Equal(t, want, got.Data)
	orphan := e.rawItem(t, itemKey(bodyKey(rec.Key, "first")))
	require.NotEmpty(t, orphan, "the crashed owner's result item")
	assert.Contains(t, orphan, "expiration", "it expires by TTL")
}

// TestResultApartResponseLost: the completion landed and its answer was lost. Sent again
// it succeeds, writing the same result's item and the same record.
func TestResultApartResponseLost(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	faulty := ddbfault.New(client)
	s, err := dynamo.New(faulty, table)
	require.NoError(t, err)
	ctx := context.Background()
	now := wallClock()

	rec := record("apart-lost", now, "tok")
	seed(t, s, rec)
	done := completedWith(rec, bigData(20<<10))
	faulty.Arm(ddbfault.Complete, ddbfault.ResponseLost, 1)
	require.Error(t, s.Complete(ctx, done, nil))
	require.NoError(t, s.Complete(ctx, done, nil), "the resend of a completion that landed")
	got, err := s.Get(ctx, rec.Key)
	require.NoError(t, err)
	assertSameRecord(t, done, got)
}

// TestResultApartMissing: a completed record whose result's item is gone (deleted by hand,
// or by TTL under a skewed clock) is never run again: the replay is ErrResultNotStored.
func TestResultApartMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	g, err := idem.New(e.store, "test", idem.WithScope("apart-missing"))
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) (string, error) { runs++; return randomJSONText(30 << 10), nil }
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
	require.NoError(t, err)
	key := mustStoredKey(t, g, "k")
	rec, err := e.store.Get(ctx, key)
	require.NoError(t, err)
	_, err = e.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(e.table), Key: itemKey(bodyKey(key, rec.LeaseToken)),
	})
	require.NoError(t, err)

	_, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
	require.ErrorIs(t, err, idem.ErrResultNotStored)
	assert.False(t, replayed)
	assert.Equal(t, 1, runs, "never run again")
	got, err := e.store.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, got.Status)
	assert.Equal(t, idemstore.EncodingNone, got.Encoding)
	assert.Nil(t, got.Data)
}

// TestResultApartForeignRef: a record may only name a result's item of its own key, so
// that no corrupt or hand-edited record can replay another key's (another tenant's)
// result.
func TestResultApartForeignRef(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	other := record("apart-foreign/other", now, "tok")
	seed(t, e.store, other)
	require.NoError(t, e.store.Complete(ctx, completedWith(other, bigData(4<<10)), nil))
	mine := record("apart-foreign/mine", now, "tok")
	seed(t, e.store, mine)
	require.NoError(t, e.store.Complete(ctx, completedWith(mine, bigData(4<<10)), nil))

	item := e.rawItem(t, itemKey(mine.Key))
	item["data_ref"] = &types.AttributeValueMemberS{Value: bodyKey(other.Key, "tok")}
	e.putRaw(t, item)
	_, err := e.store.Get(ctx, mine.Key)
	require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
	_, claimed, err := e.store.Claim(ctx, record(mine.Key, now, "new"), now)
	require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
	assert.False(t, claimed)
}

// TestCurrentVersionRecordsReplay: records written before results were kept apart (the
// result inline, schema version 1), however large, still replay.
func TestCurrentVersionRecordsReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	g, err := idem.New(e.store, "test", idem.WithScope("inline-v1"))
	require.NoError(t, err)
	lines := orderLines(50 << 10)
	raw, err := json.Marshal(lines)
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	plain := randomJSONText(300 << 10)

	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	put := func(key string, data types.AttributeValue, enc string) {
		e.putRaw(t, map[string]types.AttributeValue{
			"id": s(mustStoredKey(t, g, key)), "status": s("COMPLETED"), "expiration": n(now.Add(time.Hour).Unix()),
			"lease_token": s("old-version"), "v": n(1), "enc": s(enc), "data": data,
		})
	}
	put("gzip", &types.AttributeValueMemberB{Value: gz.Bytes()}, "json+gzip")
	put("plain", s(plain), "json")

	runs := 0
	got, replayed, err := idem.Do(ctx, g, idem.Request{Key: "gzip"}, func(context.Context) ([]orderLine, error) { runs++; return nil, nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, lines, got)
	var text string
	require.NoError(t, json.Unmarshal([]byte(plain), &text))
	gotText, replayed, err := idem.Do(ctx, g, idem.Request{Key: "plain"}, func(context.Context) (string, error) { runs++; return "", nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, text, gotText)
	assert.Zero(t, runs)
}

// TestResultApartGuarded runs the guard over results kept apart, with and without
// attached writes, and counts the round trips: a new key costs one call more than a small
// result's (the result's item), a replay one more (its read); a completion whose attached
// write fails commits nothing and releases the key, its result's item left to TTL.
func TestResultApartGuarded(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	ddblocal.DisableTTL(t, client, table)
	api := ddbcount.New(client)
	s, err := dynamo.New(api, table)
	require.NoError(t, err)
	l := newLedger(t, client)
	ctx := context.Background()
	g, err := idem.New(s, "test", idem.WithScope("apart-guarded"))
	require.NoError(t, err)
	result := randomJSONText(40 << 10)

	cases := []struct {
		name     string
		key      string
		attach   bool
		failCond bool
		want     map[string]int
		wantErr  error
		replayed bool
	}{
		{"NewKey", "plain", false, false, map[string]int{"PutItem": 2, "UpdateItem": 1}, nil, false},
		{"Replay", "plain", false, false, map[string]int{"PutItem": 1, "GetItem": 1}, nil, true},
		{"NewKeyAttached", "attached", true, false, map[string]int{"PutItem": 2, "TransactWriteItems": 1}, nil, false},
		{"ReplayAttached", "attached", true, false, map[string]int{"PutItem": 1, "GetItem": 1}, nil, true},
		{"AttachedConditionFails", "failing", true, true, map[string]int{"PutItem": 2, "TransactWriteItems": 1, "UpdateItem": 1}, idem.ErrConditionFailed, false},
	}
	for _, tc := range cases {
		api.Take()
		got, replayed, err := idem.Do(ctx, g, idem.Request{Key: tc.key}, func(ctx context.Context) (string, error) {
			if tc.attach {
				return result, dynamo.Attach(ctx, l.add(tc.key, 1, tc.failCond))
			}
			return result, nil
		})
		assert.Equal(t, tc.want, api.Take(), tc.name)
		if tc.wantErr != nil {
			require.ErrorIs(t, err, tc.wantErr, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.replayed, replayed, tc.name)
		assert.True(t, got == result, "%s: the result, byte for byte", tc.name)
	}
	assert.Equal(t, 1, l.balance(t, "attached"))
	assert.Equal(t, 0, l.balance(t, "failing"))
	gone, err := s.Get(ctx, mustStoredKey(t, g, "failing"))
	require.NoError(t, err)
	assert.False(t, gone.Live(time.Now()), "the key was released")
}

// TestResultApartExpiredTakeover: a completed record past its expiry is taken over like
// any other, and the new owner's result is the one replayed.
func TestResultApartExpiredTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	old := record("apart-expired", now.Add(-3*time.Hour), "old")
	seed(t, e.store, old)
	require.NoError(t, e.store.Complete(ctx, completedWith(old, bigData(3<<10)), nil))

	rec := record(old.Key, now, "new")
	prev, claimed, err := e.store.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, claimed, "expired: counts as absent")
	if prev != nil {
		assert.Equal(t, "old", prev.LeaseToken)
	}
	want := bigData(7 << 10)
	require.NoError(t, e.store.Complete(ctx, completedWith(rec, want), nil))
	got, err := e.store.Get(ctx, rec.Key)
	require.NoError(t, err)
	assert.Equal(t, want, got.Data)
	assert.Equal(t, "new", got.LeaseToken)
}

// TestResultApartBatch: the batch methods keep results apart as the single ones do. A
// batch completion writes the results' items first, in one call, then the records; a batch
// claim that meets completed records reads their results' items in one call more.
func TestResultApartBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	var recs, done []*idemstore.Record
	for i := range 4 {
		rec := record("apart-batch/"+strconv.Itoa(i), now, "tok")
		seed(t, e.store, rec)
		recs = append(recs, rec)
		size := 50
		if i%2 == 1 {
			size = 10 << 10 // kept apart
		}
		done = append(done, completedWith(rec, bigData(size+i)))
	}
	e.api.Take()
	for i, err := range e.store.CompleteMany(ctx, []*idemstore.Record{done[0], done[2]}) {
		require.NoError(t, err, i)
	}
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 1}, e.api.Take(), "results inline: the records alone")
	for i, err := range e.store.CompleteMany(ctx, done) {
		require.NoError(t, err, i)
	}
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 2}, e.api.Take(), "the results' items, then the records")
	for i := range done {
		got, err := e.store.Get(ctx, done[i].Key)
		require.NoError(t, err)
		assertSameRecord(t, done[i], got)
	}

	claims := make([]*idemstore.Record, len(recs))
	for i, rec := range recs {
		claims[i] = record(rec.Key, now, "again")
	}
	e.api.Take()
	res := e.store.ClaimMany(ctx, claims, now)
	assert.Equal(t, map[string]int{"BatchExecuteStatement": 1, "BatchGetItem": 2}, e.api.Take(),
		"the records read back, then the results kept apart")
	for i, r := range res {
		require.NoError(t, r.Err, i)
		require.False(t, r.Claimed, i)
		assertSameRecord(t, done[i], r.Prev)
	}
}

// TestResultApartSortKey keeps the result's item in the records' partition of a
// single-table design.
func TestResultApartSortKey(t *testing.T) {
	t.Parallel()
	opts := []dynamo.Option{dynamo.WithSortKey("sk", "idempotency#fn")}
	e := newEnv(t, opts...)
	ctx := context.Background()
	now := wallClock()
	rec := record("apart-sk", now, "tok")
	seed(t, e.store, rec)
	done := completedWith(rec, bigData(12<<10))
	require.NoError(t, e.store.Complete(ctx, done, nil))
	body := e.rawItem(t, map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "idempotency#fn"},
		"sk": &types.AttributeValueMemberS{Value: bodyKey(rec.Key, "tok")},
	})
	assert.Equal(t, done.Data, dataBytes(body["data"]))
	got, err := e.store.Get(ctx, rec.Key)
	require.NoError(t, err)
	assertSameRecord(t, done, got)
	prev, claimed, err := e.store.Claim(ctx, record(rec.Key, now, "again"), now)
	require.NoError(t, err)
	require.False(t, claimed)
	assertSameRecord(t, done, prev)
}

// TestInlineLimit: a store whose inline limit is raised keeps results up to it inline, at
// the round trips of a small result, and keeps larger ones apart.
func TestInlineLimit(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	api := ddbcount.New(client)
	s, err := dynamo.New(api, table, dynamo.WithInlineLimit(16<<10))
	require.NoError(t, err)
	ctx := context.Background()
	g, err := idem.New(s, "test", idem.WithScope("inline-limit"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name         string
		size         int
		first, again map[string]int
	}{
		// Random text gzips to about three quarters: 9 and 23 KB stored.
		{"UnderTheLimit", 12 << 10, map[string]int{"PutItem": 1, "UpdateItem": 1}, map[string]int{"PutItem": 1}},
		{"OverTheLimit", 30 << 10, map[string]int{"PutItem": 2, "UpdateItem": 1}, map[string]int{"PutItem": 1, "GetItem": 1}},
	} {
		result := randomJSONText(tc.size)
		fn := func(context.Context) (string, error) { return result, nil }
		api.Take()
		_, _, err := idem.Do(ctx, g, idem.Request{Key: tc.name}, fn)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.first, api.Take(), tc.name)
		got, replayed, err := idem.Do(ctx, g, idem.Request{Key: tc.name}, fn)
		require.NoError(t, err, tc.name)
		assert.True(t, replayed, tc.name)
		assert.True(t, got == result, tc.name)
		assert.Equal(t, tc.again, api.Take(), tc.name)
	}
}

// resultReadFault fails every read of a result's item (a GetItem of one, or a BatchGetItem
// asking for one) while armed, as a throttled read does once the SDK's retries are used
// up. Reads of records pass.
type resultReadFault struct {
	dynamo.API
	armed  atomic.Bool
	failed atomic.Int32
}

func namesResult(key map[string]types.AttributeValue) bool {
	for _, v := range key {
		if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, "#result#") {
			return true
		}
	}
	return false
}

func (f *resultReadFault) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if f.armed.Load() && namesResult(in.Key) {
		f.failed.Add(1)
		return nil, ddbfault.Throttling.Err("GetItem")
	}
	return f.API.GetItem(ctx, in, optFns...)
}

func (f *resultReadFault) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if f.armed.Load() {
		for _, ka := range in.RequestItems {
			if slices.ContainsFunc(ka.Keys, namesResult) {
				f.failed.Add(1)
				return nil, ddbfault.Throttling.Err("BatchGetItem")
			}
		}
	}
	return f.API.BatchGetItem(ctx, in, optFns...)
}

// TestResultApartUnreadClaimReturnsTheRecord: a claim that meets a completed record whose
// result is apart, and then fails to read the result's item, has learned the key's state:
// as idemstore.Store's Claim contract asks, it returns the record (without its result) as
// prev together with the error, through Claim and ClaimMany alike. Get, which has no prev
// to return, returns the error alone.
func TestResultApartUnreadClaimReturnsTheRecord(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	ddblocal.DisableTTL(t, client, table)
	faulty := &resultReadFault{API: client}
	s, err := dynamo.New(faulty, table)
	require.NoError(t, err)
	ctx := context.Background()
	now := wallClock()
	rec := record("apart-unread", now, "tok")
	seed(t, s, rec)
	done := completedWith(rec, bigData(8<<10))
	require.NoError(t, s.Complete(ctx, done, nil))

	faulty.armed.Store(true)
	met := func(t *testing.T, prev *idemstore.Record, claimed bool, err error) {
		t.Helper()
		require.ErrorIs(t, err, idem.ErrStore)
		assert.False(t, claimed)
		require.NotNil(t, prev, "the record the claim met comes with the error")
		assert.Equal(t, idemstore.StatusCompleted, prev.Status)
		assert.Equal(t, rec.LeaseToken, prev.LeaseToken)
		assert.Nil(t, prev.Data, "without the result it could not read")
	}
	t.Run("Claim", func(t *testing.T) {
		prev, claimed, err := s.Claim(ctx, record(rec.Key, now, "again"), now)
		met(t, prev, claimed, err)
	})
	t.Run("ClaimMany", func(t *testing.T) {
		res := s.ClaimMany(ctx, []*idemstore.Record{record(rec.Key, now, "again")}, now)
		require.Len(t, res, 1)
		met(t, res[0].Prev, res[0].Claimed, res[0].Err)
	})
	t.Run("Get", func(t *testing.T) {
		got, err := s.Get(ctx, rec.Key)
		require.ErrorIs(t, err, idem.ErrStore)
		assert.Nil(t, got)
	})
	assert.Equal(t, int32(3), faulty.failed.Load(), "one failed read of the result's item each")
}

// TestResultApartUnreadNeverFailsOpen: a replay of a result kept apart needs a second read
// (the result's item) after the claim has met the COMPLETED record. With WithFailOpen, a
// failure of that read must not run the handler again: the store learned the key's state,
// so the guard returns the store error (retry later), through Do and DoClaimed, and the
// retry replays the first run's result. With the result inline there is no second read
// and the same fault does nothing.
func TestResultApartUnreadNeverFailsOpen(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)
	ddblocal.DisableTTL(t, client, table)
	faulty := &resultReadFault{API: client}
	s, err := dynamo.New(faulty, table)
	require.NoError(t, err)
	ctx := context.Background()
	g, err := idem.New(s, "test", idem.WithScope("apart-failopen"), idem.WithFailOpen(true))
	require.NoError(t, err)
	do := func(batch bool, req idem.Request, fn func(context.Context) (string, error)) (string, bool, error) {
		if batch {
			return idem.DoClaimed(ctx, g.Claim(ctx, []idem.Request{req}), 0, fn)
		}
		return idem.Do(ctx, g, req, fn)
	}

	for _, tc := range []struct {
		name  string
		size  int
		batch bool
	}{
		{"Inline", 200, false},
		{"Apart", 30 << 10, false},
		{"InlineBatch", 200, true},
		{"ApartBatch", 30 << 10, true},
	} {
		var runs atomic.Int32
		result := randomJSONText(tc.size)
		fn := func(context.Context) (string, error) { runs.Add(1); return result, nil }
		req := idem.Request{Key: tc.name}
		_, _, err := idem.Do(ctx, g, req, fn)
		require.NoError(t, err, tc.name)

		faulty.armed.Store(true)
		got, replayed, err := do(tc.batch, req, fn)
		faulty.armed.Store(false)
		assert.Equal(t, int32(1), runs.Load(), "%s: the key is COMPLETED and the claim met it: the handler must not run again", tc.name)
		if tc.size > 1<<10 {
			require.ErrorIs(t, err, idem.ErrStore, "%s: the result could not be read: retry later", tc.name)
			var se *idem.StoreError
			require.ErrorAs(t, err, &se, tc.name)
			assert.Equal(t, "claim", se.Op, tc.name)
			assert.False(t, replayed, tc.name)
			got, replayed, err = do(tc.batch, req, fn) // the retry, once the store answers
		}
		require.NoError(t, err, tc.name)
		assert.True(t, replayed, "%s: replayed", tc.name)
		assert.True(t, got == result, "%s: the first run's result", tc.name)
		assert.Equal(t, int32(1), runs.Load(), "%s: ran once", tc.name)
	}
	assert.Equal(t, int32(2), faulty.failed.Load(), "one failed read of a result's item in each Apart case")
}

// TestResultApartRefForm: a record names only the result's item of its own key, of the
// exact form "<record key>#result#<32 lowercase hex>", so that no record, corrupt, edited
// by hand or forged, replays another key's (another tenant's) result. Any other data_ref
// makes the record ErrIncompatibleRecord, through Get and Claim alike. The "Forged" case
// is the review's attack: a record key that extends mine with "#result#" (as a scope with
// '#' could make, before WithScope refused it), holding another tenant's result.
func TestResultApartRefForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	const hex32 = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		tail string // what follows "<key>#result#"
		ok   bool
	}{
		{"Token", hex32, true},
		{"Short", hex32[1:], false},
		{"Long", hex32 + "0", false},
		{"UpperCase", strings.ToUpper(hex32), false},
		{"NotHex", strings.Repeat("x", 32), false},
		{"Empty", "", false},
		{"Nested", hex32 + "#result#" + hex32, false},
		{"Forged", "x.op2#" + hex32 + hex32, false},
		{"SecondResult", hex32 + "." + hex32, true},
		{"SecondResultShort", hex32 + "." + hex32[1:], false},
		{"SecondResultEmpty", hex32 + ".", false},
		{"SecondResultUpperCase", hex32 + "." + strings.ToUpper(hex32), false},
		{"SecondResultTwice", hex32 + "." + hex32 + "." + hex32, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mine := record("apart-ref/"+tc.name, now, hex32)
			seed(t, e.store, mine)
			require.NoError(t, e.store.Complete(ctx, completedWith(mine, bigData(4<<10)), nil))
			ref := mine.Key + "#result#" + tc.tail
			if ref != bodyKey(mine.Key, hex32) {
				// Another record, keyed to look like my result's item, holding a secret.
				other := record(ref, now, "other")
				seed(t, e.store, other)
				require.NoError(t, e.store.Complete(ctx, completedWith(other, []byte(`"other tenant's secret"`)), nil))
			}
			item := e.rawItem(t, itemKey(mine.Key))
			item["data_ref"] = &types.AttributeValueMemberS{Value: ref}
			e.putRaw(t, item)

			got, err := e.store.Get(ctx, mine.Key)
			prev, claimed, cerr := e.store.Claim(ctx, record(mine.Key, now, "next"), now)
			assert.False(t, claimed)
			if tc.ok {
				require.NoError(t, err)
				require.NoError(t, cerr)
				assert.Equal(t, idemstore.StatusCompleted, got.Status)
				assert.Equal(t, idemstore.StatusCompleted, prev.Status)
				return
			}
			if got != nil {
				t.Logf("Get replays %q", got.Data)
			}
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord, "data_ref %q", ref)
			require.ErrorIs(t, cerr, idem.ErrIncompatibleRecord, "data_ref %q", ref)
		})
	}
}

// TestResultApartRecompletion: Complete "must be safe to send again after a failure whose
// outcome is unknown", and the guard does send a completion again, with another body: after
// ErrTooLarge it completes without the result (owner.go, Guard.concludeCompletion). Whatever the
// completions of one token before it, the last one leaves a consistent item: its result
// inline (data, schema version 1, no data_ref), apart (data_ref, version 2, no data), or
// none (neither, version 1). Before, a completion without a result apart left the
// previous one's data_ref at version 1, and every later read of the key failed with
// ErrIncompatibleRecord until it expired. Complete and CompleteMany both keep the first
// (no completion under a token overwrites another), and must leave it consistent.
func TestResultApartRecompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	apart, inline := bigData(8<<10), []byte(`{"id":"o-1"}`)
	for _, tc := range []struct {
		name          string
		first, second []byte // nil: completed without the result
	}{
		{"ApartThenNone", apart, nil},
		{"ApartThenInline", apart, inline},
		{"InlineThenApart", inline, apart},
		{"NoneThenApart", nil, apart},
		{"ApartThenApart", apart, bigData(9 << 10)},
	} {
		for _, batch := range []bool{false, true} {
			t.Run(tc.name+"/batch="+strconv.FormatBool(batch), func(t *testing.T) {
				t.Parallel()
				rec := record("apart-recomplete/"+tc.name+"/"+strconv.FormatBool(batch), now, "tok")
				seed(t, e.store, rec)
				completion := func(data []byte) *idemstore.Record {
					done := completedWith(rec, data)
					if data == nil {
						done.Encoding = idemstore.EncodingNone
					}
					return done
				}
				require.NoError(t, e.store.Complete(ctx, completion(tc.first), nil))
				// No completion overwrites one under its token (the guard's completion with
				// OnRefused's result relies on it): the first stays.
				if batch {
					require.NoError(t, e.store.CompleteMany(ctx, []*idemstore.Record{completion(tc.second)})[0],
						"already completed under the token: nil")
				} else {
					require.NoError(t, e.store.Complete(ctx, completion(tc.second), nil), "already completed under the token: nil")
				}
				last, kept := completion(tc.first), tc.first

				item := e.rawItem(t, itemKey(rec.Key))
				_, hasRef := attrS(item, "data_ref")
				switch {
				case len(kept) > 1<<10:
					assert.True(t, hasRef, "the result apart")
					assert.NotContains(t, item, "data")
					assert.Equal(t, int64(2), attrN(t, item, "v"))
				case kept != nil:
					assert.False(t, hasRef, "no data_ref with the result inline")
					assert.Contains(t, item, "data")
					assert.Equal(t, int64(1), attrN(t, item, "v"))
				default:
					assert.False(t, hasRef, "no data_ref without a result")
					assert.NotContains(t, item, "data")
					assert.Equal(t, int64(1), attrN(t, item, "v"))
				}
				got, err := e.store.Get(ctx, rec.Key)
				require.NoError(t, err, "the completed record stays readable")
				assertSameRecord(t, last, got)
				prev, claimed, err := e.store.Claim(ctx, record(rec.Key, now, "next"), now)
				require.NoError(t, err, "a claim meets a completed record, not an unreadable one")
				assert.False(t, claimed)
				assertSameRecord(t, last, prev)
			})
		}
	}
}

// TestResultApartKeyTooLong: the result's item is keyed "<key>#result#<token>", 40 bytes
// longer than its record's key. DynamoDB limits a partition key to 2048 bytes and a sort
// key to 1024: for a record key within the limit whose result's item's key is not (which
// the guard's keys, at most 322 bytes since idem bounds the scope, never are), the result
// cannot be kept apart, and Complete reports it as ErrTooLarge, sending neither the
// result's item nor the completion. The guard then completes without the result, as it
// does for a result over the item size limit, so the key is recorded done and never runs
// again; before, the PutItem's ValidationException left the key in progress, and the
// handler ran again after the lease. At the boundary (a key exactly at the limit) the
// result is kept apart. Through Complete and CompleteMany alike.
func TestResultApartKeyTooLong(t *testing.T) {
	t.Parallel()
	for _, layout := range []struct {
		name  string
		opts  []dynamo.Option
		limit int
		key   func(string) map[string]types.AttributeValue
	}{
		{"PartitionKey", nil, 2048, itemKey},
		{"SortKey", []dynamo.Option{dynamo.WithSortKey("sk", "idempotency")}, 1024,
			func(k string) map[string]types.AttributeValue {
				return map[string]types.AttributeValue{
					"id": &types.AttributeValueMemberS{Value: "idempotency"}, "sk": &types.AttributeValueMemberS{Value: k},
				}
			}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, layout.opts...)
			ctx := context.Background()
			now := wallClock()
			const token = "0123456789abcdef0123456789abcdef"
			apart := len(bodyKey("", token)) // what the result's item's key adds
			for _, tc := range []struct {
				name    string
				keyLen  int
				tooLong bool
			}{
				{"AtTheLimit", layout.limit - apart, false},
				{"OneOver", layout.limit - apart + 1, true},
				{"RecordKeyAtTheLimit", layout.limit, true},
			} {
				for _, batch := range []bool{false, true} {
					name := tc.name + "/batch=" + strconv.FormatBool(batch)
					t.Run(name, func(t *testing.T) {
						prefix := layout.name + "/" + name + "/"
						rec := record(prefix+strings.Repeat("k", tc.keyLen-len(prefix)), now, token)
						require.Len(t, rec.Key, tc.keyLen)
						seed(t, e.store, rec)
						done := completedWith(rec, bigData(4<<10))
						complete := func(done *idemstore.Record) error {
							if batch {
								return e.store.CompleteMany(ctx, []*idemstore.Record{done})[0]
							}
							return e.store.Complete(ctx, done, nil)
						}
						e.api.Take()
						err := complete(done)
						if !tc.tooLong {
							require.NoError(t, err)
							got, err := e.store.Get(ctx, rec.Key)
							require.NoError(t, err)
							assertSameRecord(t, done, got)
							return
						}
						require.ErrorIs(t, err, idemstore.ErrTooLarge, "the result's item's key is over the limit")
						assert.Empty(t, e.api.Take(), "neither the result's item nor the completion was sent")
						item := e.rawItem(t, layout.key(rec.Key))
						assert.Equal(t, "INPROGRESS", item["status"].(*types.AttributeValueMemberS).Value)

						// The guard's fallback: the completion without the result.
						done.Data, done.Encoding = nil, idemstore.EncodingNone
						require.NoError(t, complete(done))
						got, err := e.store.Get(ctx, rec.Key)
						require.NoError(t, err)
						assert.Equal(t, idemstore.StatusCompleted, got.Status)
						assert.Equal(t, idemstore.EncodingNone, got.Encoding)
						_, claimed, err := e.store.Claim(ctx, record(rec.Key, now, "next"), now)
						require.NoError(t, err)
						assert.False(t, claimed, "recorded done: never run again")
					})
				}
			}
		})
	}
}

// TestResultApartLongestKey: with the longest scope and operation idem accepts, the stored
// key (322 bytes) and its result's item's key fit DynamoDB's key limits in either layout:
// a result kept apart is written, and a retry replays it without running the handler.
func TestResultApartLongestKey(t *testing.T) {
	t.Parallel()
	for _, layout := range []struct {
		name string
		opts []dynamo.Option
	}{
		{"PartitionKey", nil},
		{"SortKey", []dynamo.Option{dynamo.WithSortKey("sk", "idempotency")}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, layout.opts...)
			ctx := context.Background()
			g, err := idem.New(e.store, strings.Repeat("o", idem.MaxOperationLength),
				idem.WithScope(strings.Repeat("s", idem.MaxScopeLength)))
			require.NoError(t, err)
			require.Len(t, mustStoredKey(t, g, "k"), 322)
			var runs atomic.Int32
			result := randomJSONText(8 << 10)
			fn := func(context.Context) (string, error) { runs.Add(1); return result, nil }
			_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
			require.NoError(t, err)
			got, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
			require.NoError(t, err)
			assert.True(t, replayed)
			assert.True(t, got == result, "the result, kept apart")
			assert.Equal(t, int32(1), runs.Load())
		})
	}
}
