package dynamo

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

func TestEncodeEpoch(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // 1772366400
	cases := []struct {
		name string
		t    time.Time
		unit time.Duration
		want string
	}{
		{"SecondsExact", base, time.Second, "1772366400"},
		{"SecondsRoundDown", base.Add(time.Second - time.Nanosecond), time.Second, "1772366400"},
		{"SecondsNextSecond", base.Add(time.Second), time.Second, "1772366401"},
		{"MillisExact", base, time.Millisecond, "1772366400000"},
		{"MillisRoundDown", base.Add(time.Millisecond - time.Nanosecond), time.Millisecond, "1772366400000"},
		{"MillisNextMillisecond", base.Add(time.Millisecond), time.Millisecond, "1772366400001"},
		{"MillisLastOfSecond", base.Add(999 * time.Millisecond), time.Millisecond, "1772366400999"},
		{"EpochSeconds", time.Unix(0, 0), time.Second, "0"},
		{"BeforeEpochSeconds", time.Unix(0, -1), time.Second, "-1"},
		{"BeforeEpochMillis", time.Unix(0, -1), time.Millisecond, "-1"},
		{"OtherZoneSameInstant", base.In(time.FixedZone("X", 5*3600)), time.Second, "1772366400"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, encodeEpoch(tc.t, tc.unit).Value)
		})
	}
}

func TestDecodeEpoch(t *testing.T) {
	t.Parallel()
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	cases := []struct {
		name    string
		av      types.AttributeValue
		unit    time.Duration
		want    time.Time
		wantErr bool
	}{
		{"Seconds", n("1772366400"), time.Second, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), false},
		{"Millis", n("1772366400999"), time.Millisecond, time.Date(2026, 3, 1, 12, 0, 0, 999e6, time.UTC), false},
		{"Zero", n("0"), time.Second, time.Unix(0, 0).UTC(), false},
		{"NegativeMillis", n("-1"), time.Millisecond, time.Unix(0, -1e6).UTC(), false},
		{"FractionRoundsDown", n("1772366400.9"), time.Second, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), false},
		{"Exponent", n("1.7723664e9"), time.Second, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), false},
		{"NotANumber", n("soon"), time.Second, time.Time{}, true},
		{"NaN", n("NaN"), time.Second, time.Time{}, true},
		{"Infinity", n("Infinity"), time.Second, time.Time{}, true},
		{"Huge", n("1e300"), time.Second, time.Time{}, true},
		{"String", &types.AttributeValueMemberS{Value: "1772366400"}, time.Second, time.Time{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeEpoch(tc.av, tc.unit)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "want %v, got %v", tc.want, got)
		})
	}
}

// TestEpochRoundTrip checks that decoding an encoded time gives the time rounded down to
// the unit, so that a record's end as stored and as read agree at the boundary.
func TestEpochRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   time.Time
		unit time.Duration
		want time.Time
	}{
		{time.Unix(1772366400, 999_999_999), time.Second, time.Unix(1772366400, 0)},
		{time.Unix(1772366400, 999_999_999), time.Millisecond, time.Unix(1772366400, 999_000_000)},
		{time.Unix(-5, 500), time.Second, time.Unix(-5, 0)},
		{time.Unix(-5, -500), time.Millisecond, time.Unix(-5, -1_000_000)},
		{time.Date(2100, 1, 1, 0, 0, 0, 1, time.UTC), time.Millisecond, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		got, err := decodeEpoch(encodeEpoch(tc.in, tc.unit), tc.unit)
		require.NoError(t, err)
		assert.True(t, tc.want.Equal(got), "unit %v: %v -> %v, want %v", tc.unit, tc.in, got, tc.want)
	}
}

func testStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := New(nopAPI{}, "t", opts...)
	require.NoError(t, err)
	return s
}

// nopAPI satisfies API for tests that never call DynamoDB.
type nopAPI struct{ API }

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	full := idemstore.Record{
		Key: "scope#abc", Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(1500 * time.Millisecond), Fingerprint: "f", Data: []byte(`{"a":1}`),
		Encoding: "json", LeaseToken: "tok", Checkpoint: "cp", Version: idemstore.SchemaVersion,
	}
	minimal := idemstore.Record{Key: "k", Status: idemstore.StatusCompleted}
	binary := full
	binary.Status, binary.Data, binary.Encoding = idemstore.StatusFailed, []byte{0, 1, 2, 0xff}, "json+gzip"

	stores := map[string]*Store{
		"Default": testStore(t),
		"SortKey": testStore(t, WithSortKey("sk", "p")),
		"Renamed": testStore(t, WithAttributes(Attributes{ID: "pk", Data: "body"})),
	}
	for sname, s := range stores {
		for rname, rec := range map[string]idemstore.Record{"Full": full, "Minimal": minimal, "Binary": binary} {
			t.Run(sname+"/"+rname, func(t *testing.T) {
				t.Parallel()
				got, err := s.decodeRecord(s.encodeRecord(&rec))
				require.NoError(t, err)
				assert.Equal(t, rec, *got)
			})
		}
	}
}

func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	null := &types.AttributeValueMemberNULL{Value: true}
	valid := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": str("k"), "status": str("COMPLETED")}
	}
	cases := []struct {
		name    string
		edit    func(item map[string]types.AttributeValue)
		wantErr bool
	}{
		{"Minimal", func(map[string]types.AttributeValue) {}, false},
		{"NullCountsAsAbsent", func(i map[string]types.AttributeValue) { i["data"], i["checkpoint"] = null, null }, false},
		{"PowertoolsVersionless", func(i map[string]types.AttributeValue) { i["data"] = str(`{"x":1}`) }, false},
		{"DataBinary", func(i map[string]types.AttributeValue) { i["data"] = &types.AttributeValueMemberB{Value: []byte{1}} }, false},
		{"NilAttributeValue", func(i map[string]types.AttributeValue) { i["checkpoint"] = nil }, false},
		{"MissingKey", func(i map[string]types.AttributeValue) { delete(i, "id") }, true},
		{"EmptyKey", func(i map[string]types.AttributeValue) { i["id"] = str("") }, true},
		{"KeyNotString", func(i map[string]types.AttributeValue) { i["id"] = num("1") }, true},
		{"MissingStatus", func(i map[string]types.AttributeValue) { delete(i, "status") }, true},
		{"NullStatus", func(i map[string]types.AttributeValue) { i["status"] = null }, true},
		{"UnknownStatus", func(i map[string]types.AttributeValue) { i["status"] = str("EXPIRED") }, true},
		{"ExpirationNotNumber", func(i map[string]types.AttributeValue) { i["expiration"] = str("1") }, true},
		{"LeaseEndGarbage", func(i map[string]types.AttributeValue) { i["in_progress_expiration"] = num("x") }, true},
		{"DataList", func(i map[string]types.AttributeValue) { i["data"] = &types.AttributeValueMemberL{} }, true},
		{"TokenBinary", func(i map[string]types.AttributeValue) { i["lease_token"] = &types.AttributeValueMemberB{} }, true},
		{"VersionTooNew", func(i map[string]types.AttributeValue) { i["v"] = num("2") }, true},
		{"VersionNegative", func(i map[string]types.AttributeValue) { i["v"] = num("-1") }, true},
		{"VersionFraction", func(i map[string]types.AttributeValue) { i["v"] = num("1.5") }, true},
		{"VersionOverflow", func(i map[string]types.AttributeValue) { i["v"] = num("99999999999") }, true},
		{"VersionString", func(i map[string]types.AttributeValue) { i["v"] = str("1") }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			item := valid()
			tc.edit(item)
			rec, err := s.decodeRecord(item)
			if tc.wantErr {
				require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
				assert.Nil(t, rec)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "k", rec.Key)
		})
	}
}
