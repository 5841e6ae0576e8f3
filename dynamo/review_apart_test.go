package dynamo_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
)

// Review of "results kept apart" (b0a1156..7d4a27c). Each test states a property the
// change promises (dynamo/body.go, Store.Complete's doc, RELIABILITY.md "Results kept
// apart") and fails where it does not hold.

// TestReviewApartLongKeyRunsTwice: the result's item is keyed "<key>#result#<token>", 40
// bytes longer than the record's key. DynamoDB limits a sort key to 1024 bytes (a
// partition key to 2048), and idem bounds neither the scope nor the stored key. With
// WithSortKey, a record key of 985 to 1024 bytes is accepted (the claim succeeds, and a
// store that keeps results inline completes it), but its record item is over 1 KB with any
// result, so every result goes apart and its item's key is refused: a ValidationException
// that is not ErrTooLarge, so the guard does not fall back to completing without the
// result. The record stays in progress, and after the lease the next request runs the
// handler again, each time.
func TestReviewApartLongKeyRunsTwice(t *testing.T) {
	t.Parallel()
	opts := []dynamo.Option{dynamo.WithSortKey("sk", "idempotency")}
	e := newEnv(t, opts...)
	ctx := context.Background()
	var nowNanos atomic.Int64
	nowNanos.Store(wallClock().UnixNano())
	clock := idem.ClockFunc(func() time.Time { return time.Unix(0, nowNanos.Load()).UTC() })
	scope := strings.Repeat("s", 940)

	// Control: the same key layout, results inline (the behaviour before the change).
	inline, err := dynamo.New(e.client, e.table, append(opts, dynamo.WithInlineLimit(400<<10))...)
	require.NoError(t, err)
	gi, err := idem.New(inline, "op", idem.WithScope(scope), idem.WithClock(clock))
	require.NoError(t, err)
	key := mustStoredKey(t, gi, "control")
	t.Logf("stored key: %d bytes; its result's item: %d bytes", len(key), len(key)+len("#result#")+32)
	var controlRuns atomic.Int32
	control := func(context.Context) (string, error) { controlRuns.Add(1); return "ok", nil }
	_, _, err = idem.Do(ctx, gi, idem.Request{Key: "control"}, control)
	require.NoError(t, err, "results inline: the key is fine")
	_, replayed, err := idem.Do(ctx, gi, idem.Request{Key: "control"}, control)
	require.NoError(t, err)
	require.True(t, replayed)

	g, err := idem.New(e.store, "op", idem.WithScope(scope), idem.WithClock(clock))
	require.NoError(t, err)
	var runs atomic.Int32
	fn := func(context.Context) (string, error) { runs.Add(1); return "ok", nil }
	_, _, err = idem.Do(ctx, g, idem.Request{Key: "default"}, fn)
	t.Logf("first run: err=%v", err)
	nowNanos.Add(int64(10 * time.Minute)) // past the lease, well within the expiry
	_, replayed, err = idem.Do(ctx, g, idem.Request{Key: "default"}, fn)
	t.Logf("retry: replayed=%v err=%v runs=%d", replayed, err, runs.Load())
	assert.Equal(t, int32(1), runs.Load(), "the handler ran once and succeeded: a retry must not run it again")
}
