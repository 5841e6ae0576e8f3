package pgoutbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

// TestRelayOncePublishesInOrderAndMarks: one pass publishes every committed event once,
// each ordering key's in commit order, one message per key per publisher call; the next
// pass finds nothing; the lag is 0 after, and positive before.
func TestRelayOncePublishesInOrderAndMarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var want []string
	for i := range 6 {
		want = append(want, e.produce(t, fmt.Sprintf("k-%d", i), fmt.Sprintf("acct-%d", i%2), "a", "b")...)
	}
	rec := &recorder{}
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec)
	require.NoError(t, err)
	ctx := context.Background()
	lag, err := r.Lag(ctx)
	require.NoError(t, err)
	assert.Positive(t, lag, "events wait")

	p, err := r.RelayOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, pgoutbox.Pass{Published: 12}, p)
	got := rec.published()
	ids := make([]string, len(got))
	perKey := map[string][]string{}
	for i, m := range got {
		ids[i] = m.ID
		perKey[m.OrderingKey] = append(perKey[m.OrderingKey], m.ID)
	}
	assert.ElementsMatch(t, want, ids)
	for k, ks := range perKey {
		assert.Equal(t, filter(want, got, k), ks, "key %s in commit order", k)
	}

	p, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, pgoutbox.Pass{}, p, "nothing left")
	lag, err = r.Lag(ctx)
	require.NoError(t, err)
	assert.Zero(t, lag)
}

// filter returns the ids in want whose message in got has ordering key k, in want's order.
func filter(want []string, got []outbox.Message, k string) []string {
	key := map[string]string{}
	for _, m := range got {
		key[m.ID] = m.OrderingKey
	}
	var out []string
	for _, id := range want {
		if key[id] == k {
			out = append(out, id)
		}
	}
	return out
}

// TestRelayFailureHoldsItsKey: a message the publisher refuses holds back its key's later
// messages (not other keys'), and is published first when it succeeds.
func TestRelayFailureHoldsItsKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.produce(t, "k-a", "acct-a", "a1", "a2", "a3")
	b := e.produce(t, "k-b", "acct-b", "b1", "b2")
	rec := &recorder{fail: func(m outbox.Message, attempt int) bool { return m.Type == "a2" && attempt == 1 }}
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec)
	require.NoError(t, err)
	ctx := context.Background()
	p, err := r.RelayOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, pgoutbox.Pass{Published: 3, Failed: 1}, p)

	var attempts int
	var lastErr string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT attempts, last_error FROM "`+e.store.OutboxTable()+`" WHERE id = $1`, a[1]).Scan(&attempts, &lastErr))
	assert.Equal(t, 1, attempts)
	assert.Contains(t, lastErr, "refused")

	p, err = r.RelayOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, pgoutbox.Pass{Published: 2}, p)
	var order []string
	for _, m := range rec.published() {
		order = append(order, m.ID)
	}
	assert.Equal(t, a, filter(a, rec.published(), "acct-a"))
	assert.Equal(t, b, filter(b, rec.published(), "acct-b"))
	assert.Len(t, order, 5, "each published once")
}

// TestRunWakesOnNotify: with polling set to an hour, an event committed while Run waits is
// published: the NOTIFY of its commit woke the relay.
func TestRunWakesOnNotify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	var lags []time.Duration
	var mu sync.Mutex
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec, pgoutbox.WithPollInterval(time.Hour),
		pgoutbox.WithHooks(pgoutbox.Hooks{OnLag: func(d time.Duration) { mu.Lock(); lags = append(lags, d); mu.Unlock() }}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(cancel)
	// The first pass runs at start; wait for it (the lag hook runs after it), so what
	// follows can only be published on a wake-up.
	eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(lags) > 0 }, "the first pass")
	ids := e.produce(t, "k-1", "acct-1", "placed")
	eventually(t, func() bool { return len(rec.published()) == 1 }, "the event published on NOTIFY")
	assert.Equal(t, ids[0], rec.published()[0].ID)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestConcurrentRelaysKeepKeyOrder: several relays run at once over one outbox while
// producers commit; the publisher fails some first attempts. Every event is published,
// and each key's first publications come in commit order.
func TestConcurrentRelaysKeepKeyOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{fail: func(m outbox.Message, attempt int) bool { return attempt == 1 && m.ID[len(m.ID)-1] < '3' }}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the pool closes, also on failure
	for range 3 {
		r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec, pgoutbox.WithBatchSize(7),
			pgoutbox.WithPollInterval(20*time.Millisecond), pgoutbox.WithRetryDelay(5*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	var want []string
	var mu sync.Mutex
	var pwg sync.WaitGroup
	for p := range 4 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range 15 {
				ids := e.produce(t, fmt.Sprintf("p%d-%d", p, i), fmt.Sprintf("acct-%d", i%3), "x", "y")
				mu.Lock()
				want = append(want, ids...)
				mu.Unlock()
			}
		}()
	}
	pwg.Wait()
	eventually(t, func() bool { return len(rec.published()) >= len(want) }, "every event published")
	cancel()
	wg.Wait()

	got := rec.published()
	seen := map[string]bool{}
	perKey := map[string][]string{}
	for _, m := range got {
		if !seen[m.ID] {
			seen[m.ID] = true
			perKey[m.OrderingKey] = append(perKey[m.OrderingKey], m.ID)
		}
	}
	assert.Len(t, seen, len(want))
	seqs := commitOrder(t, e)
	for k, ids := range perKey {
		assert.Equal(t, seqs[k], ids, "key %s published in commit order", k)
	}
}

// commitOrder returns each ordering key's event ids in seq order.
func commitOrder(t *testing.T, e *env) map[string][]string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT ordering_key, id FROM "`+e.store.OutboxTable()+`" ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var k, id string
		require.NoError(t, rows.Scan(&k, &id))
		out[k] = append(out[k], id)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestNewRefusesBadArguments: New names what is wrong.
func TestNewRefusesBadArguments(t *testing.T) {
	t.Parallel()
	pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) []error { return nil })
	cases := []struct {
		name string
		opts []pgoutbox.Option
	}{
		{"batch 0", []pgoutbox.Option{pgoutbox.WithBatchSize(0)}},
		{"poll 0", []pgoutbox.Option{pgoutbox.WithPollInterval(0)}},
		{"retry negative", []pgoutbox.Option{pgoutbox.WithRetryDelay(-time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pgoutbox.New(new(pgxpool.Pool), "t", pub, tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
		})
	}
}

// TestRunNeedsTwoConnections: Run holds one of the pool's connections to listen, so a
// pool of one could never run a pass: Run refuses it at once.
func TestRunNeedsTwoConnections(t *testing.T) {
	t.Parallel()
	pool := pgtest.PoolFor(t, pgtest.URL(t), func(c *pgxpool.Config) { c.MaxConns = 1 })
	r, err := pgoutbox.New(pool, "idempotency_outbox", &recorder{})
	require.NoError(t, err)
	require.ErrorIs(t, r.Run(context.Background()), idem.ErrInvalidOption)
}

// TestFailureNotRecordedKeepsTheMarks: the statement that records the publisher's
// failures (attempts, last_error) fails, here on a CHECK the table was given: it goes to
// OnError, and the pass still commits the marks of what the broker took, which is not
// published again.
func TestFailureNotRecordedKeepsTheMarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.pool.Exec(context.Background(), `ALTER TABLE "`+e.store.OutboxTable()+`" ADD CHECK (last_error IS NULL)`)
	require.NoError(t, err)
	ok := e.produce(t, "k-1", "acct-1", "taken")
	e.produce(t, "k-2", "acct-2", "refused")
	rec := &recorder{fail: func(m outbox.Message, _ int) bool { return m.Type == "refused" }}
	var hookErrs []error
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec, pgoutbox.WithHooks(pgoutbox.Hooks{
		OnError: func(err error) { hookErrs = append(hookErrs, err) },
	}))
	require.NoError(t, err)
	for range 2 {
		p, err := r.RelayOnce(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, p.Failed)
	}
	assert.Len(t, hookErrs, 2, "each pass's failure to record goes to OnError")
	var got []string
	for _, m := range rec.published() {
		got = append(got, m.ID)
	}
	assert.Equal(t, ok, got, "acct-1's event is published once: its mark committed")
}
