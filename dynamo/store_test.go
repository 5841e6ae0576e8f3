package dynamo_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// TestClaim checks the claim condition against the in-memory store's semantics, which are
// those of idemstore.Record, including at the exact expiry and lease boundaries.
func TestClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t0 := wallClock()
	completed := func(now time.Time) *idemstore.Record {
		r := record("", now, "old")
		r.Status, r.LeaseExpires, r.Data, r.Encoding, r.Checkpoint = idemstore.StatusCompleted, time.Time{}, []byte(`{"n":1}`), "json", "cp-done"
		return r
	}
	inProgress := func(now time.Time) *idemstore.Record { return record("", now, "old") }
	checkpointed := func(now time.Time) *idemstore.Record {
		r := record("", now, "old")
		r.Checkpoint = "cp-1"
		return r
	}
	cases := []struct {
		name        string
		existing    *idemstore.Record // nil: no record
		at          time.Duration
		carry       string // the checkpoint the claim carries
		wantClaimed bool
	}{
		{"Absent", nil, 0, "", true},
		{"AbsentCarrying", nil, 0, "cp-1", true},
		{"CompletedLive", completed(t0), 30 * time.Minute, "", false},
		{"CompletedOneSecondBeforeExpiry", completed(t0), time.Hour - time.Second, "", false},
		{"CompletedAtExpiry", completed(t0), time.Hour, "", true},
		{"CompletedPastExpiry", completed(t0), 2 * time.Hour, "", true},
		{"InProgressLeaseRunning", inProgress(t0), 30 * time.Second, "", false},
		{"InProgressOneMillisecondBeforeLeaseEnd", inProgress(t0), time.Minute - time.Millisecond, "", false},
		{"InProgressAtLeaseEnd", inProgress(t0), time.Minute, "", true},
		{"InProgressPastLeaseEnd", inProgress(t0), 2 * time.Minute, "", true},
		{"InProgressPastLeaseEndCarryingOther", inProgress(t0), 2 * time.Minute, "cp-1", false},
		{"InProgressPastExpiry", inProgress(t0), 2 * time.Hour, "", true},
		{"CheckpointLeaseRunningCarrying", checkpointed(t0), 30 * time.Second, "cp-1", false},
		{"CheckpointAtLeaseEnd", checkpointed(t0), time.Minute, "", false},
		{"CheckpointAtLeaseEndCarrying", checkpointed(t0), time.Minute, "cp-1", true},
		{"CheckpointPastLeaseEnd", checkpointed(t0), 2 * time.Minute, "", false},
		{"CheckpointPastLeaseEndCarrying", checkpointed(t0), 2 * time.Minute, "cp-1", true},
		{"CheckpointPastLeaseEndCarryingOther", checkpointed(t0), 2 * time.Minute, "cp-0", false},
		{"CheckpointPastExpiry", checkpointed(t0), 2 * time.Hour, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "claim/" + tc.name
			mem := memstore.New()
			if tc.existing != nil {
				existing := *tc.existing
				existing.Key = key
				mem.Put(existing)
				seed(t, e.store, &existing)
			}
			now := t0.Add(tc.at)
			rec := record(key, now, "new")
			rec.Checkpoint = tc.carry

			memPrev, memClaimed, err := mem.Claim(context.Background(), rec, now)
			require.NoError(t, err)
			require.Equal(t, tc.wantClaimed, memClaimed, "in-memory store")

			prev, claimed, err := e.store.Claim(context.Background(), rec, now)
			require.NoError(t, err)
			assert.Equal(t, tc.wantClaimed, claimed)
			if memPrev == nil {
				assert.Nil(t, prev)
			} else {
				require.NotNil(t, prev, "the replaced or holding record comes back")
				assertSameRecord(t, memPrev, prev)
			}
			got, err := e.store.Get(context.Background(), key)
			require.NoError(t, err)
			if tc.wantClaimed {
				assertSameRecord(t, rec, got)
			} else {
				assertSameRecord(t, memPrev, got)
			}
		})
	}
}

// seed writes rec as it is into an empty key: a claim of an absent key writes its record
// unchanged, whatever its status.
func seed(t *testing.T, s idemstore.Store, rec *idemstore.Record) {
	t.Helper()
	_, claimed, err := s.Claim(context.Background(), rec, time.Unix(0, 0))
	require.NoError(t, err)
	require.True(t, claimed, "seed %s: key in use", rec.Key)
}

// roundUp returns t rounded up to a whole unit, as the store writes a record's ends.
func roundUp(t time.Time, unit time.Duration) time.Time {
	if r := t.Truncate(unit); !r.Equal(t) {
		return r.Add(unit)
	}
	return t
}

// assertSameRecord compares records as the store keeps them: expiry in whole seconds, lease
// end in whole milliseconds, both rounded up (a record never ends early).
func assertSameRecord(t *testing.T, want, got *idemstore.Record) {
	t.Helper()
	require.NotNil(t, got)
	w, g := *want, *got
	w.Expires, w.LeaseExpires = roundUp(w.Expires, time.Second), roundUp(w.LeaseExpires, time.Millisecond)
	assert.True(t, w.Expires.Equal(g.Expires), "Expires: want %v, got %v", w.Expires, g.Expires)
	assert.True(t, w.LeaseExpires.Equal(g.LeaseExpires), "LeaseExpires: want %v, got %v", w.LeaseExpires, g.LeaseExpires)
	w.Expires, w.LeaseExpires, g.Expires, g.LeaseExpires = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if len(w.Data) == 0 && len(g.Data) == 0 {
		w.Data, g.Data = nil, nil
	}
	assert.Equal(t, w, g)
}

func TestGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock().Add(123 * time.Millisecond)

	got, err := e.store.Get(ctx, "get/absent")
	require.NoError(t, err)
	assert.Nil(t, got, "no record, no error")

	rec := record("get/present", now, "tok")
	rec.Checkpoint = "cp"
	seed(t, e.store, rec)
	got, err = e.store.Get(ctx, rec.Key)
	require.NoError(t, err)
	assertSameRecord(t, rec, got)
}

func TestComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()

	cases := []struct {
		name     string
		data     []byte
		encoding string
		wantType string // DynamoDB type of the data attribute, "" for none
	}{
		{"PlainJSONIsString", []byte(`{"order":"o-1"}`), "json", "S"},
		{"CompressedIsBinary", []byte{0x1f, 0x8b, 0x08, 0x00}, "json+gzip", "B"},
		{"OtherCodecIsBinary", []byte("\x82\xa1n\x01"), "msgpack", "B"},
		{"InvalidUTF8JSONIsBinary", []byte("\"\xff\""), "json", "B"},
		{"ErrorMessageIsBinary", []byte("card declined"), idemstore.EncodingError, "B"},
		{"NoBody", nil, idemstore.EncodingNone, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := record("complete/"+tc.name, now, "tok")
			seed(t, e.store, rec)
			require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "charged", 1))

			done := *rec
			done.Status, done.Data, done.Encoding = idemstore.StatusCompleted, tc.data, tc.encoding
			done.Expires, done.LeaseExpires = now.Add(2*time.Hour), time.Time{}
			require.NoError(t, e.store.Complete(ctx, &done, nil))

			got, err := e.store.Get(ctx, rec.Key)
			require.NoError(t, err)
			done.Checkpoint, done.CheckpointSeq = "charged", 1 // kept from the lease
			assertSameRecord(t, &done, got)
			assert.True(t, got.LeaseExpires.IsZero(), "the lease end is removed")

			item := e.rawItem(t, map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: rec.Key}})
			switch tc.wantType {
			case "S":
				assert.IsType(t, &types.AttributeValueMemberS{}, item["data"])
			case "B":
				assert.IsType(t, &types.AttributeValueMemberB{}, item["data"])
			default:
				assert.NotContains(t, item, "data")
			}
			assert.NotContains(t, item, "in_progress_expiration")
		})
	}

	t.Run("AbsentRecordIsLeaseLost", func(t *testing.T) {
		t.Parallel()
		done := record("complete/absent", now, "tok")
		done.Status = idemstore.StatusCompleted
		err := e.store.Complete(ctx, done, nil)
		require.ErrorIs(t, err, idem.ErrLeaseLost)
		got, err := e.store.Get(ctx, done.Key)
		require.NoError(t, err)
		assert.Nil(t, got, "a fenced completion never creates a record")
	})
	t.Run("RejectsUnknownAttachment", func(t *testing.T) {
		t.Parallel()
		rec := record("complete/bad-attachment", now, "tok")
		seed(t, e.store, rec)
		done := *rec
		done.Status = idemstore.StatusCompleted
		err := e.store.Complete(ctx, &done, []any{func() error { return nil }})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "types.TransactWriteItem")
	})
}

func TestRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rec := record("release/k", wallClock(), "tok")
	seed(t, e.store, rec)

	require.ErrorIs(t, e.store.Release(ctx, rec.Key, "other", wallClock()), idem.ErrLeaseLost)
	got, err := e.store.Get(ctx, rec.Key)
	require.NoError(t, err)
	require.NotNil(t, got, "a wrong token deletes nothing")

	e.api.Take()
	require.NoError(t, e.store.Release(ctx, rec.Key, "tok", wallClock()))
	assert.Equal(t, map[string]int{"UpdateItem": 1}, e.api.Take(), "one write, as the DeleteItem it replaces")
	got, err = e.store.Get(ctx, rec.Key)
	require.NoError(t, err)
	require.NotNil(t, got, "kept as a tombstone, never deleted")
	assert.Equal(t, idemstore.StatusInProgress, got.Status)
	assert.Equal(t, idemstore.ReleasedToken("tok"), got.LeaseToken)
	assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)
	assert.Equal(t, rec.Expires, got.Expires, "it expires (TTL) when the record would have")
	require.ErrorIs(t, e.store.Release(ctx, rec.Key, "tok", wallClock()), idem.ErrLeaseLost, "nothing left to release")

	t.Run("KeepsCheckpoint", func(t *testing.T) {
		rec := record("release/checkpoint", wallClock(), "tok")
		seed(t, e.store, rec)
		require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "charged", 1))
		require.ErrorIs(t, e.store.Release(ctx, rec.Key, "other", wallClock()), idem.ErrLeaseLost)
		e.api.Take()
		require.NoError(t, e.store.Release(ctx, rec.Key, "tok", wallClock()))
		assert.Equal(t, map[string]int{"UpdateItem": 1}, e.api.Take(), "one write ends the lease")
		got, err := e.store.Get(ctx, rec.Key)
		require.NoError(t, err)
		require.NotNil(t, got, "the record stays for its checkpoint")
		assert.Equal(t, "charged", got.Checkpoint)
		assert.Equal(t, idemstore.StatusInProgress, got.Status)
		assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)

		now := wallClock()
		next := record(rec.Key, now, "next")
		_, claimed, err := e.store.Claim(ctx, next, now)
		require.NoError(t, err)
		assert.False(t, claimed, "only a claim carrying the checkpoint takes over")
		next.Checkpoint, next.CheckpointSeq = "charged", got.CheckpointSeq
		_, claimed, err = e.store.Claim(ctx, next, now)
		require.NoError(t, err)
		assert.True(t, claimed)
	})
	t.Run("CompletedIsNeverReleased", func(t *testing.T) {
		rec := record("release/completed", wallClock(), "tok")
		seed(t, e.store, rec)
		done := *rec
		done.Status = idemstore.StatusCompleted
		require.NoError(t, e.store.Complete(ctx, &done, nil))
		require.ErrorIs(t, e.store.Release(ctx, rec.Key, "tok", wallClock()), idem.ErrLeaseLost)
		got, err := e.store.Get(ctx, rec.Key)
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, idemstore.StatusCompleted, got.Status)
	})
}

func TestExtendAndCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	rec := record("extend/k", now, "tok")
	seed(t, e.store, rec)

	later := now.Add(5*time.Minute + 250*time.Millisecond)
	require.NoError(t, e.store.Extend(ctx, rec.Key, "tok", later))
	require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "step-2", 1))
	got, err := e.store.Get(ctx, rec.Key)
	require.NoError(t, err)
	assert.True(t, later.Equal(got.LeaseExpires), "lease end %v", got.LeaseExpires)
	assert.Equal(t, "step-2", got.Checkpoint)

	require.ErrorIs(t, e.store.Extend(ctx, rec.Key, "other", later), idem.ErrLeaseLost)
	require.ErrorIs(t, e.store.SetCheckpoint(ctx, rec.Key, "other", "x", 1), idem.ErrLeaseLost)
	require.ErrorIs(t, e.store.Extend(ctx, "extend/absent", "tok", later), idem.ErrLeaseLost)

	done := *rec
	done.Status = idemstore.StatusCompleted
	require.NoError(t, e.store.Complete(ctx, &done, nil))
	require.ErrorIs(t, e.store.Extend(ctx, rec.Key, "tok", later), idem.ErrLeaseLost, "a completed record has no lease")
	require.ErrorIs(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "x", 1), idem.ErrLeaseLost)
}

// TestFencing takes over an expired lease and checks that nothing the old owner does can
// touch the new owner's record.
func TestFencing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	old := record("fencing/k", now, "old")
	seed(t, e.store, old)
	require.NoError(t, e.store.SetCheckpoint(ctx, old.Key, "old", "payment_charged", 1))

	takeoverAt := old.LeaseExpires.Add(time.Second)
	mine := record(old.Key, takeoverAt, "new")
	prev, claimed, err := e.store.Claim(ctx, mine, takeoverAt)
	require.NoError(t, err)
	require.False(t, claimed, "a takeover must carry the checkpoint")
	require.NotNil(t, prev, "the refusing record comes back")
	assert.Equal(t, "payment_charged", prev.Checkpoint)
	assert.Equal(t, "old", prev.LeaseToken)

	mine.Checkpoint, mine.CheckpointSeq = prev.Checkpoint, prev.CheckpointSeq
	prev, claimed, err = e.store.Claim(ctx, mine, takeoverAt)
	require.NoError(t, err)
	require.True(t, claimed)
	require.NotNil(t, prev, "the takeover returns the replaced record")
	assert.Equal(t, "old", prev.LeaseToken)

	lateDone := *old
	lateDone.Status, lateDone.Data, lateDone.Encoding = idemstore.StatusCompleted, []byte(`"late"`), "json"
	require.ErrorIs(t, e.store.Complete(ctx, &lateDone, nil), idem.ErrLeaseLost)
	require.ErrorIs(t, e.store.Release(ctx, old.Key, "old", wallClock()), idem.ErrLeaseLost)
	require.ErrorIs(t, e.store.Extend(ctx, old.Key, "old", takeoverAt.Add(time.Hour)), idem.ErrLeaseLost)
	require.ErrorIs(t, e.store.SetCheckpoint(ctx, old.Key, "old", "late", 1), idem.ErrLeaseLost)

	var ccf *types.ConditionalCheckFailedException
	assert.ErrorAs(t, e.store.Release(ctx, old.Key, "old", wallClock()), &ccf, "the SDK error stays reachable")

	got, err := e.store.Get(ctx, old.Key)
	require.NoError(t, err)
	assertSameRecord(t, mine, got)
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newLedger(t, e.client)
	ctx := context.Background()
	big := []byte(strings.Repeat("x", 410*1024))

	for _, withAttachment := range []bool{false, true} {
		name := map[bool]string{false: "UpdateItem", true: "TransactWriteItems"}[withAttachment]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := record("too-large/"+name, wallClock(), "tok")
			seed(t, e.store, rec)
			done := *rec
			done.Status, done.Data, done.Encoding = idemstore.StatusCompleted, big, "json+gzip"
			var attached []any
			if withAttachment {
				attached = []any{l.add("acct-"+name, 1, false)}
			}
			err := e.store.Complete(ctx, &done, attached)
			require.ErrorIs(t, err, idemstore.ErrTooLarge)
			var apiErr smithy.APIError
			assert.ErrorAs(t, err, &apiErr)

			done.Data, done.Encoding = nil, idemstore.EncodingNone
			require.NoError(t, e.store.Complete(ctx, &done, attached), "completing without the body fits")
		})
	}
}

// TestIncompatibleRecord writes malformed items directly and checks that reading them is an
// error, never a panic and never a claim over a live record.
func TestIncompatibleRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := wallClock()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	future := n(strconv.FormatInt(now.Add(time.Hour).Unix(), 10))

	cases := []struct {
		name  string
		attrs map[string]types.AttributeValue
	}{
		{"MissingStatus", map[string]types.AttributeValue{"expiration": future}},
		{"StatusNotString", map[string]types.AttributeValue{"status": n("1"), "expiration": future}},
		{"UnknownStatus", map[string]types.AttributeValue{"status": s("DONE"), "expiration": future}},
		{"FutureSchema", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("2")}},
		{"VersionNotNumber", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": s("1")}},
		{"DataNotStringOrBinary", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "data": n("1")}},
		{"LeaseEndNotNumber", map[string]types.AttributeValue{"status": s("INPROGRESS"), "expiration": future, "in_progress_expiration": s("soon")}},
		{"TokenNotString", map[string]types.AttributeValue{"status": s("INPROGRESS"), "expiration": future, "in_progress_expiration": n(strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)), "lease_token": &types.AttributeValueMemberBOOL{Value: true}}},
		// A result kept apart is named only by a completed record of schema version 2, with
		// no result inline, and only under the record's own key.
		{"ResultRefInVersion1", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("1"), "data_ref": s("incompatible/ResultRefInVersion1#result#t")}},
		{"ResultRefNotString", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("2"), "data_ref": n("1")}},
		{"ResultRefAndData", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("2"), "data_ref": s("incompatible/ResultRefAndData#result#t"), "data": s("{}")}},
		{"ResultRefInProgress", map[string]types.AttributeValue{"status": s("INPROGRESS"), "expiration": future, "v": n("2"), "data_ref": s("incompatible/ResultRefInProgress#result#t")}},
		{"ResultRefOfAnotherKey", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("2"), "data_ref": s("incompatible/other#result#t")}},
		{"ResultRefWithoutToken", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("2"), "data_ref": s("incompatible/ResultRefWithoutToken#result#")}},
		{"Version2WithoutResultRef", map[string]types.AttributeValue{"status": s("COMPLETED"), "expiration": future, "v": n("2"), "data": s("{}")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "incompatible/" + tc.name
			item := map[string]types.AttributeValue{"id": s(key)}
			for k, v := range tc.attrs {
				item[k] = v
			}
			e.putRaw(t, item)

			_, err := e.store.Get(ctx, key)
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord)

			_, claimed, err := e.store.Claim(ctx, record(key, now, "tok"), now)
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
			assert.False(t, claimed)
		})
	}
}

// TestLayouts runs a full claim-complete-replay cycle with renamed attributes (including
// characters that expression placeholders may not hold) and with a sort key.
func TestLayouts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []dynamo.Option
		key  func(recordKey string) map[string]types.AttributeValue
	}{
		{
			name: "Renamed",
			opts: []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{
				ID: "pk", Status: "idem.status", Expiration: "ttl", LeaseToken: "lease-token", Data: "body",
			})},
			key: func(k string) map[string]types.AttributeValue {
				return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
			},
		},
		{
			name: "SingleTable",
			opts: []dynamo.Option{
				dynamo.WithAttributes(dynamo.Attributes{ID: "PK"}),
				dynamo.WithSortKey("SK", "idempotency#orders"),
			},
			key: func(k string) map[string]types.AttributeValue {
				return map[string]types.AttributeValue{
					"PK": &types.AttributeValueMemberS{Value: "idempotency#orders"},
					"SK": &types.AttributeValueMemberS{Value: k},
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.opts...)
			ctx := context.Background()
			now := wallClock()
			rec := record("layout/k", now, "tok")
			prev, claimed, err := e.store.Claim(ctx, rec, now)
			require.NoError(t, err)
			require.True(t, claimed)
			assert.Nil(t, prev)
			require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok", "cp", 1))
			require.NoError(t, e.store.Extend(ctx, rec.Key, "tok", now.Add(2*time.Minute)))

			done := *rec
			done.Status, done.Data, done.Encoding, done.LeaseExpires, done.Checkpoint = idemstore.StatusCompleted, []byte(`{}`), "json", time.Time{}, "cp"
			done.CheckpointSeq = 1
			require.NoError(t, e.store.Complete(ctx, &done, nil))

			prev, claimed, err = e.store.Claim(ctx, record(rec.Key, now, "tok2"), now)
			require.NoError(t, err)
			assert.False(t, claimed)
			assertSameRecord(t, &done, prev)
			assert.NotEmpty(t, e.rawItem(t, tc.key(rec.Key)), "the item sits under the configured key")

			// A release keeps a record with a checkpoint, lease ended; the claim carrying the
			// checkpoint takes it over, and a release without one keeps a tombstone.
			later := now.Add(2 * time.Hour)
			next := record(rec.Key, later, "tok3")
			_, claimed, err = e.store.Claim(ctx, next, later)
			require.NoError(t, err)
			require.True(t, claimed, "the completed record expired")
			require.NoError(t, e.store.SetCheckpoint(ctx, rec.Key, "tok3", "cp", 1))
			require.NoError(t, e.store.Release(ctx, rec.Key, "tok3", wallClock()))
			got, err := e.store.Get(ctx, rec.Key)
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, "cp", got.Checkpoint)
			assert.True(t, got.LeaseEnded(time.Now()), "lease ended at the release: %v", got.LeaseExpires)

			next = record(rec.Key, later, "tok4")
			next.Checkpoint, next.CheckpointSeq = "cp", got.CheckpointSeq
			_, claimed, err = e.store.Claim(ctx, next, later)
			require.NoError(t, err)
			require.True(t, claimed)
			require.ErrorIs(t, e.store.Release(ctx, rec.Key, "tok3", wallClock()), idem.ErrLeaseLost, "tok3 no longer owns it")

			fresh := record("layout/fresh", later, "tok5")
			_, claimed, err = e.store.Claim(ctx, fresh, later)
			require.NoError(t, err)
			require.True(t, claimed)
			require.NoError(t, e.store.Release(ctx, fresh.Key, "tok5", wallClock()))
			got, err = e.store.Get(ctx, fresh.Key)
			require.NoError(t, err)
			require.NotNil(t, got, "without a checkpoint too, the record is kept as a tombstone")
			assert.Equal(t, idemstore.ReleasedToken("tok5"), got.LeaseToken)
			assert.False(t, got.Live(later))
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	cases := []struct {
		name    string
		client  dynamo.API
		table   string
		opts    []dynamo.Option
		wantErr string // "" for success; else the option or argument the error names
	}{
		{"Defaults", client, "t", nil, ""},
		{"NilOptionIgnored", client, "t", []dynamo.Option{nil}, ""},
		{"NilClient", nil, "t", nil, "New: client"},
		{"EmptyTable", client, "", nil, "New: table"},
		{"DuplicateAttribute", client, "t", []dynamo.Option{dynamo.WithAttributes(dynamo.Attributes{Data: "status"})}, "WithAttributes"},
		{"SortKeyClashes", client, "t", []dynamo.Option{dynamo.WithSortKey("id", "p")}, "WithSortKey"},
		{"EmptySortKey", client, "t", []dynamo.Option{dynamo.WithSortKey("", "p")}, "WithSortKey"},
		{"EmptyPartitionValue", client, "t", []dynamo.Option{dynamo.WithSortKey("sk", "")}, "WithSortKey"},
		{"InlineLimitLowest", client, "t", []dynamo.Option{dynamo.WithInlineLimit(1024)}, ""},
		{"InlineLimitHighest", client, "t", []dynamo.Option{dynamo.WithInlineLimit(400 << 10)}, ""},
		{"InlineLimitBelowOneUnit", client, "t", []dynamo.Option{dynamo.WithInlineLimit(1023)}, "WithInlineLimit"},
		{"InlineLimitOverItemLimit", client, "t", []dynamo.Option{dynamo.WithInlineLimit(400<<10 + 1)}, "WithInlineLimit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := dynamo.New(tc.client, tc.table, tc.opts...)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.table, s.Table())
				return
			}
			require.Error(t, err)
			assert.Nil(t, s)
			assert.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Contains(t, err.Error(), "dynamo: "+tc.wantErr)
		})
	}
}

// TestClaimMetTransactionNeverFailsOpen: a single claim that meets an owner's
// completion transaction (TransactionConflictException: the item exists and is being
// completed right now) reads the record; when that read fails, Claim returns a bare
// ErrStore and Do under WithFailOpen runs the handler while the owner completes.
func TestClaimMetTransactionNeverFailsOpen(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{
		put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
		},
		get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, errOutage },
	}
	s, err := dynamo.New(api, "t")
	require.NoError(t, err)
	g, err := idem.New(s, "op", idem.WithFailOpen(true))
	require.NoError(t, err)
	ran := false
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "a"}, func(context.Context) (int, error) {
		ran = true
		return 1, nil
	})
	t.Logf("Do: %v", err)
	assert.False(t, ran, "the handler ran unguarded while another owner's transaction held the key")
}
