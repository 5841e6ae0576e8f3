package redisstore_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/redisstore"
)

func inProgress(key, token string, now time.Time) *idemstore.Record {
	return &idemstore.Record{Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
		LeaseExpires: now.Add(time.Minute), LeaseToken: token, Version: idemstore.SchemaVersion}
}

func TestNew(t *testing.T) {
	client := env.Client(t)
	cases := []struct {
		name   string
		client redisstore.Client
		opts   []redisstore.Option
		ok     bool
	}{
		{"Defaults", client, nil, true},
		{"NilClient", nil, nil, false},
		{"ZeroMaxRecordSize", client, []redisstore.Option{redisstore.WithMaxRecordSize(0)}, false},
		{"EmptyPrefix", client, []redisstore.Option{redisstore.WithKeyPrefix("")}, true},
		{"NegativeExpiryGrace", client, []redisstore.Option{redisstore.WithExpiryGrace(-time.Second)}, false},
		{"ZeroExpiryGrace", client, []redisstore.Option{redisstore.WithExpiryGrace(0)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redisstore.New(tc.client, tc.opts...)
			if tc.ok {
				require.NoError(t, err)
				assert.NotNil(t, s)
				return
			}
			require.ErrorIs(t, err, idem.ErrInvalidOption)
		})
	}
}

// TestRecordRoundTrip writes every field and reads it back: binary data byte for byte,
// ends rounded up to the millisecond, the checkpoint kept through completion.
func TestRecordRoundTrip(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := time.Date(2100, 1, 2, 3, 4, 5, 600_000_001, time.UTC)
	rec := inProgress("k", "tok", now)
	rec.Fingerprint = "fp"
	rec.Checkpoint = "cp"
	_, claimed, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, claimed)
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, rec.Expires.Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli(), got.Expires.UnixMilli(), "ends round up")
	assert.Equal(t, rec.LeaseExpires.Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli(), got.LeaseExpires.UnixMilli())
	assert.Equal(t, "cp", got.Checkpoint)

	data := make([]byte, 1000)
	_, _ = rand.Read(data)
	data[0], data[1] = 0, '\n'
	done := *rec
	done.Status, done.Data, done.Encoding, done.LeaseExpires, done.Checkpoint = idemstore.StatusCompleted, data, "json+gzip", time.Time{}, ""
	require.NoError(t, s.Complete(ctx, &done, nil))
	got, err = s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, idemstore.StatusCompleted, got.Status)
	assert.Equal(t, data, got.Data)
	assert.Equal(t, "json+gzip", got.Encoding)
	assert.Equal(t, "fp", got.Fingerprint)
	assert.Equal(t, "tok", got.LeaseToken)
	assert.Equal(t, "cp", got.Checkpoint, "the stored checkpoint is kept")
	assert.True(t, got.LeaseExpires.IsZero(), "a completed record has no lease")
	assert.Equal(t, idemstore.SchemaVersion, got.Version)

	missing, err := s.Get(ctx, "absent")
	require.NoError(t, err)
	assert.Nil(t, missing)
}

// TestNativeExpiry shows that each write sets the key's expiry (PEXPIREAT) to the
// record's Expires plus the expiry grace, rounded up to the millisecond, that the server
// deletes a record once that has passed on its clock, and that a record past its Expires
// but not yet deleted counts as absent to a claim.
func TestNativeExpiry(t *testing.T) {
	client := env.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	expireTime := func(key string) int64 {
		ms, err := client.Do(ctx, "PEXPIRETIME", s.RedisKey(key)).Int64()
		require.NoError(t, err)
		return ms
	}
	now := time.Now()
	rec := inProgress("k", "tok", now)
	_, _, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	deleteAt := func(expires time.Time) int64 {
		return expires.Add(redisstore.DefaultExpiryGrace).Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli()
	}
	want := deleteAt(rec.Expires)
	assert.Equal(t, want, expireTime("k"))

	require.NoError(t, s.SetCheckpoint(ctx, "k", "tok", "cp", 1))
	require.NoError(t, s.Extend(ctx, "k", "tok", now.Add(30*time.Minute)))
	require.NoError(t, s.Release(ctx, "k", "tok", now))
	assert.Equal(t, want, expireTime("k"), "writes under the lease keep the expiry")

	rec2 := inProgress("k", "tok2", now)
	rec2.Checkpoint, rec2.CheckpointSeq = "cp", 1
	_, claimed, err := s.Claim(ctx, rec2, now)
	require.NoError(t, err)
	require.True(t, claimed)
	done := *rec2
	done.Status, done.Expires = idemstore.StatusCompleted, now.Add(48*time.Hour)
	require.NoError(t, s.Complete(ctx, &done, nil))
	assert.Equal(t, deleteAt(done.Expires), expireTime("k"), "completion sets the result's expiry")
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, done.Expires.Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli(), got.Expires.UnixMilli(),
		"the record keeps its own Expires, without the grace")

	// Past its Expires, within the grace: still stored, and absent to a claim.
	afterExpiry := done.Expires.Add(time.Millisecond)
	_, claimed, err = s.Claim(ctx, inProgress("k", "tok3", afterExpiry), afterExpiry)
	require.NoError(t, err)
	assert.True(t, claimed, "a record past its Expires counts as absent")

	past := inProgress("gone", "tok", now.Add(-2*time.Hour)) // Expires an hour ago
	_, claimed, err = s.Claim(ctx, past, now.Add(-2*time.Hour))
	require.NoError(t, err)
	require.True(t, claimed)
	got, err = s.Get(ctx, "gone")
	require.NoError(t, err)
	assert.Nil(t, got, "the server deleted the record at its expiry plus the grace")

	forever := inProgress("forever", "tok", now)
	forever.Expires = time.Time{}
	_, _, err = s.Claim(ctx, forever, now)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), expireTime("forever"), "a record without Expires never expires")
}

// TestExtendNeverShortens shows that an extension to an earlier end than the stored one
// (delayed behind a later one) leaves the lease as it is.
func TestExtendNeverShortens(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := time.Now()
	_, _, err := s.Claim(ctx, inProgress("k", "tok", now), now)
	require.NoError(t, err)
	require.NoError(t, s.Extend(ctx, "k", "tok", now.Add(10*time.Minute)))
	require.NoError(t, s.Extend(ctx, "k", "tok", now.Add(5*time.Minute)))
	got, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, now.Add(10*time.Minute).Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli(), got.LeaseExpires.UnixMilli())
	require.ErrorIs(t, s.Extend(ctx, "k", "other", now.Add(time.Hour)), idem.ErrLeaseLost)
}

// TestIncompatibleHash shows that a hash the store did not write (another writer, a
// mistyped prefix) is an error wrapping idem.ErrIncompatibleRecord, both when read and
// when it refuses a claim, never a record to overwrite.
func TestIncompatibleHash(t *testing.T) {
	client := env.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	cases := []struct {
		name   string
		fields []any
	}{
		{"UnknownStatus", []any{"status", "DONE", "expiration", "99999999999999"}},
		{"NoStatus", []any{"foo", "bar"}},
		{"BadExpiration", []any{"status", "COMPLETED", "expiration", "soon"}},
		{"BadLease", []any{"status", "INPROGRESS", "in_progress_expiration", "x"}},
		{"BadVersion", []any{"status", "COMPLETED", "v", "one"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, client.HSet(ctx, s.RedisKey(tc.name), tc.fields...).Err())
			_, err := s.Get(ctx, tc.name)
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
			now := time.Now()
			// The script reads an unparsable end as none, so each of these holds its key.
			_, claimed, err := s.Claim(ctx, inProgress(tc.name, "tok", now), now)
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
			assert.False(t, claimed)
		})
	}
}

// TestLargeResults stores and replays results far beyond DynamoDB's 400 KB item limit,
// incompressible so that they are stored at full size, with the guard's own limit raised
// to the store's.
func TestLargeResults(t *testing.T) {
	client := env.Client(t)
	g, err := idem.New(newStore(t, client), "large", idem.WithClock(storetest.NewClock()),
		idem.WithMaxResultSize(redisstore.DefaultMaxRecordSize))
	require.NoError(t, err)
	ctx := context.Background()
	for _, size := range []int{1 << 20, 5 << 20} {
		t.Run(byteSize(size), func(t *testing.T) {
			big := randomText(size)
			runs := 0
			fn := func(context.Context) (string, error) { runs++; return big, nil }
			v, replayed, err := idem.Do(ctx, g, idem.Request{Key: byteSize(size)}, fn)
			require.NoError(t, err)
			assert.False(t, replayed)
			require.Equal(t, big, v)
			v, replayed, err = idem.Do(ctx, g, idem.Request{Key: byteSize(size)}, fn)
			require.NoError(t, err)
			assert.True(t, replayed)
			assert.Equal(t, len(big), len(v))
			assert.True(t, big == v, "the replay is the result byte for byte")
			assert.Equal(t, 1, runs)
		})
	}
}

// TestTooLarge shows the store's size limit: a record over it is refused with
// idemstore.ErrTooLarge before anything is sent, and the guard then records the completion
// without the result, so the work still runs once and replays get ErrResultNotStored.
func TestTooLarge(t *testing.T) {
	client, c := countedClient(t)
	s := newStore(t, client, redisstore.WithMaxRecordSize(2<<20))
	ctx := context.Background()
	now := time.Now()
	_, _, err := s.Claim(ctx, inProgress("direct", "tok", now), now)
	require.NoError(t, err)
	done := inProgress("direct", "tok", now)
	done.Status, done.Data, done.Encoding = idemstore.StatusCompleted, []byte(randomText(3<<20)), "json"
	c.take()
	require.ErrorIs(t, s.Complete(ctx, done, nil), idemstore.ErrTooLarge)
	assert.Empty(t, c.take(), "nothing sent")

	g, err := idem.New(s, "toolarge", idem.WithClock(storetest.NewClock()), idem.WithMaxResultSize(16<<20))
	require.NoError(t, err)
	huge := randomText(3 << 20)
	runs := 0
	fn := func(context.Context) (string, error) { runs++; return huge, nil }
	v, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
	require.NoError(t, err)
	assert.True(t, huge == v, "the first caller gets its result")
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
	require.ErrorIs(t, err, idem.ErrResultNotStored)
	assert.Equal(t, 1, runs)
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

// randomText returns n bytes of printable, incompressible text.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// TestServerClockAhead runs the state a heartbeat leaves a record in once the watchdog has
// extended its lease to its cap, the record's Expires, with the server's clock ahead of the
// callers' by lead (the callers' clock here is the wall clock less lead). The owner's
// handler is still running; a second claim 10 ms later must not win. The server deletes
// records on its own clock (PEXPIREAT) at Expires plus the expiry grace, so a lead up to the
// grace changes nothing.
func TestServerClockAhead(t *testing.T) {
	cases := []struct {
		name string
		lead time.Duration
		opts []redisstore.Option
	}{
		{name: "LeadWithinDefaultGrace", lead: 5 * time.Second},
		{name: "LeadWithinGrace", lead: 5 * time.Second, opts: []redisstore.Option{redisstore.WithExpiryGrace(10 * time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, env.Client(t), tc.opts...)
			ctx := context.Background()
			callerNow := time.Now().Add(-tc.lead)
			end := callerNow.Add(3 * time.Second)
			a := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, Expires: end, LeaseExpires: end,
				LeaseToken: "A", Version: idemstore.SchemaVersion}
			_, ok, err := s.Claim(ctx, a, callerNow)
			require.NoError(t, err)
			require.True(t, ok)

			later := callerNow.Add(10 * time.Millisecond)
			prev, ok, err := s.Claim(ctx, inProgress("k", "B", later), later)
			require.NoError(t, err)
			assert.False(t, ok, "a claim took over a live lease: the key's handler runs twice")
			if assert.NotNil(t, prev) {
				assert.Equal(t, "A", prev.LeaseToken)
			}
		})
	}

	// The documented limit: a lead beyond the grace deletes the record before its Expires by
	// the callers' clock, and a claim then wins while the first owner's lease runs.
	t.Run("LeadBeyondGrace", func(t *testing.T) {
		s := newStore(t, env.Client(t), redisstore.WithExpiryGrace(time.Second))
		ctx := context.Background()
		callerNow := time.Now().Add(-5 * time.Second)
		end := callerNow.Add(3 * time.Second)
		a := &idemstore.Record{Key: "k", Status: idemstore.StatusInProgress, Expires: end, LeaseExpires: end,
			LeaseToken: "A", Version: idemstore.SchemaVersion}
		_, ok, err := s.Claim(ctx, a, callerNow)
		require.NoError(t, err)
		require.True(t, ok)
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Nil(t, got, "deleted by the server's clock, 5s ahead, at Expires+1s")
	})
}

// TestClaimAtLeaseEndInstants claims at the boundary instants of a lease whose end is not a
// whole millisecond: a record's lease never counts as ended before the instant asked for,
// and does at the stored, rounded-up end.
func TestClaimAtLeaseEndInstants(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := time.Date(2100, 1, 2, 3, 4, 5, 600_000_001, time.UTC)
	rec := inProgress("k", "A", now)
	rec.LeaseExpires = now.Add(time.Minute + 500*time.Microsecond)
	_, ok, err := s.Claim(ctx, rec, now)
	require.NoError(t, err)
	require.True(t, ok)

	for _, at := range []time.Time{rec.LeaseExpires.Add(-time.Nanosecond), rec.LeaseExpires} {
		_, ok, err := s.Claim(ctx, inProgress("k", "B", at), at)
		require.NoError(t, err)
		assert.False(t, ok, "claimed at %v, before the stored lease end", at)
	}
	stored := time.UnixMilli(rec.LeaseExpires.UnixMilli() + 1)
	_, ok, err = s.Claim(ctx, inProgress("k", "B", stored), stored)
	require.NoError(t, err)
	assert.True(t, ok, "not claimable at the stored (rounded-up) lease end")
}

// TestFencedOwnerLandsNothing: after a release that keeps a checkpoint, nothing of the
// releasing owner lands, and the takeover must carry the checkpoint. A completion of a
// record the server has deleted recreates nothing; one that comes after Expires while the
// record is still stored (within the expiry grace) lands, as in the other stores.
func TestFencedOwnerLandsNothing(t *testing.T) {
	ctx := context.Background()
	t.Run("AfterRelease", func(t *testing.T) {
		s := newStore(t, env.Client(t))
		now := time.Now()
		_, ok, err := s.Claim(ctx, inProgress("k", "A", now), now)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, s.SetCheckpoint(ctx, "k", "A", "c1", 1))
		require.NoError(t, s.Release(ctx, "k", "A", now))
		for name, err := range map[string]error{
			"checkpoint": s.SetCheckpoint(ctx, "k", "A", "c2", 2),
			"extend":     s.Extend(ctx, "k", "A", now.Add(time.Hour)),
			"release":    s.Release(ctx, "k", "A", now),
			"complete": s.Complete(ctx, &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted,
				Expires: now.Add(time.Hour), LeaseToken: "A", Version: idemstore.SchemaVersion}, nil),
		} {
			assert.ErrorIs(t, err, idem.ErrLeaseLost, name)
		}
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, "c1", got.Checkpoint)

		prev, ok, err := s.Claim(ctx, inProgress("k", "B", now), now)
		require.NoError(t, err)
		assert.False(t, ok, "a takeover without the checkpoint")
		assert.Equal(t, "c1", prev.Checkpoint)
		b := inProgress("k", "B", now)
		b.Checkpoint, b.CheckpointSeq = "c1", prev.CheckpointSeq
		_, ok, err = s.Claim(ctx, b, now)
		require.NoError(t, err)
		assert.True(t, ok)
	})
	t.Run("AfterDeletion", func(t *testing.T) {
		s := newStore(t, env.Client(t), redisstore.WithExpiryGrace(0))
		now := time.Now()
		b := inProgress("k", "B", now)
		b.Expires = now.Add(300 * time.Millisecond)
		b.LeaseExpires = b.Expires
		_, ok, err := s.Claim(ctx, b, now)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(500 * time.Millisecond) // the server deletes the key at Expires (no grace)
		err = s.Complete(ctx, &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted,
			Expires: time.Now().Add(time.Hour), LeaseToken: "B", Version: idemstore.SchemaVersion}, nil)
		require.ErrorIs(t, err, idem.ErrLeaseLost)
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Nil(t, got, "a completion after deletion recreated the record")
	})
	t.Run("AfterExpiryWithinGrace", func(t *testing.T) {
		s := newStore(t, env.Client(t))
		claimedAt := time.Now().Add(-2 * time.Second)
		b := inProgress("k", "B", claimedAt)
		b.Expires = claimedAt.Add(time.Second) // a second ago by every clock
		b.LeaseExpires = b.Expires
		_, ok, err := s.Claim(ctx, b, claimedAt)
		require.NoError(t, err)
		require.True(t, ok)
		done := &idemstore.Record{Key: "k", Status: idemstore.StatusCompleted,
			Expires: time.Now().Add(time.Hour), LeaseToken: "B", Version: idemstore.SchemaVersion}
		require.NoError(t, s.Complete(ctx, done, nil))
		got, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, idemstore.StatusCompleted, got.Status)
	})
}
