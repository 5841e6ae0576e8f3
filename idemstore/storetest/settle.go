package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

func (h Harness) errorReleases(t *testing.T) {
	f := h.fixture(t)
	k := key(t)
	boom := errors.New("boom")
	runs := 0
	fail := func(context.Context) (result, error) { runs++; return result{}, boom }
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fail)
	require.ErrorIs(t, err, boom)

	v, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
		runs++
		return result{N: 2}, nil
	})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 2, v.N)
	assert.Equal(t, 2, runs)
}

func (h Harness) rememberedFailure(t *testing.T) {
	permanent := errors.New("card declined")
	f := h.fixture(t, idem.WithRememberFailures(func(err error) bool { return errors.Is(err, permanent) }))
	k := key(t)
	runs := 0
	fn := func(context.Context) (result, error) { runs++; return result{}, permanent }
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fn)
	require.ErrorIs(t, err, permanent)

	_, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, fn)
	require.ErrorIs(t, err, idem.ErrFailed)
	var fe *idem.FailedError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "card declined", fe.Message)
	assert.False(t, replayed)
	assert.Equal(t, 1, runs)
}

func (h Harness) largeResults(t *testing.T) {
	f := h.fixture(t, idem.WithMaxResultSize(100*1024))
	ctx := context.Background()

	t.Run("Compressed", func(t *testing.T) {
		k := key(t)
		big := result{Msg: strings.Repeat(`{"sku":"A-100","quantity":3},`, 2000)} // ~58 KB of JSON
		_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(context.Context) (result, error) { return big, nil })
		require.NoError(t, err)
		rec := storedRecord(t, f, k)
		assert.Equal(t, "json+gzip", rec.Encoding)
		assert.Less(t, len(rec.Data), len(big.Msg)/4)
		v, replayed, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(context.Context) (result, error) { return result{}, nil })
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, big, v)
	})
	t.Run("TooLarge", func(t *testing.T) {
		k := key(t)
		runs := 0
		huge := result{Msg: randomText(300 * 1024)} // incompressible, over the limit
		fn := func(context.Context) (result, error) { runs++; return huge, nil }
		v, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, fn)
		require.NoError(t, err)
		assert.Equal(t, huge, v, "the first caller still gets its result")
		rec := storedRecord(t, f, k)
		assert.Equal(t, idemstore.StatusCompleted, rec.Status)
		assert.Equal(t, idemstore.EncodingNone, rec.Encoding)
		_, _, err = do(h, ctx, f.guard, idem.Request{Key: k}, fn)
		require.ErrorIs(t, err, idem.ErrResultNotStored)
		assert.Equal(t, 1, runs)
	})
}

func (h Harness) incompatible(t *testing.T) {
	cases := []struct {
		name     string
		data     string
		encoding string
		version  int
	}{
		{"UndecodableData", "{not json", "json", idemstore.SchemaVersion},
		{"UnknownEncoding", `{"n":1}`, "msgpack", idemstore.SchemaVersion},
		{"BadGzip", "not gzip", "json+gzip", idemstore.SchemaVersion},
		{"FutureSchema", `{"n":1}`, "json", idemstore.SchemaVersion + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := h.fixture(t)
			k := key(t)
			// Write the record through the store's own operations, as another writer would.
			runs := 0
			_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
				runs++
				return result{}, errors.New("release me")
			})
			require.Error(t, err)
			sk := storedKey(t, f.guard, k)
			now := f.clock.Now()
			rec := &idemstore.Record{Key: sk, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour),
				LeaseExpires: now.Add(time.Minute), LeaseToken: "tok", Version: idemstore.SchemaVersion}
			_, claimed, err := f.store.Claim(context.Background(), rec, now)
			require.NoError(t, err)
			require.True(t, claimed)
			done := *rec
			done.Status, done.Data, done.Encoding, done.Version = idemstore.StatusCompleted, []byte(tc.data), tc.encoding, tc.version
			require.NoError(t, f.store.Complete(context.Background(), &done, nil))

			_, _, err = do(h, context.Background(), f.guard, idem.Request{Key: k}, func(context.Context) (result, error) {
				runs++
				return result{}, nil
			})
			require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
			assert.Equal(t, 1, runs, "an incompatible record is an error, never a re-run")
		})
	}
}
