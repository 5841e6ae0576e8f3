package pgoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

// killer is a publisher whose broker takes every message, but which, for the first kills
// calls, terminates the relay's connection (its transaction idle between the take and the
// mark) before answering: the relay's marks never commit, as when its host dies or its
// PostgreSQL connection is killed between publishing and committing.
type killer struct {
	t     *testing.T
	e     *env
	mu    sync.Mutex
	kills int
	got   []outbox.Message
}

func (k *killer) Publish(ctx context.Context, msgs []outbox.Message) []error {
	k.mu.Lock()
	k.got = append(k.got, msgs...)
	kill := k.kills > 0
	if kill {
		k.kills--
	}
	k.mu.Unlock()
	if kill {
		// The relay's backend: in a transaction, idle while the publisher runs, its last
		// statement a read of this test's outbox table.
		_, err := k.e.pool.Exec(context.WithoutCancel(ctx), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE state = 'idle in transaction' AND query LIKE '%FOR UPDATE%' AND query LIKE '%' || $1 || '%'`, k.e.store.OutboxTable())
		if err != nil {
			k.t.Errorf("terminate: %v", err)
		}
	}
	return nil
}

func (k *killer) delivered() []outbox.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]outbox.Message(nil), k.got...)
}

// TestReview12_RelayConnectionKilledBetweenPublishAndMark: two relays; the PostgreSQL
// connection of a relay is terminated, several times, after the broker took a pass's
// messages and before their marks commit. Schedule: relay 1 takes keys acct-0..2, publishes
// round 1 (each key's oldest), its backend is killed, the round's further messages go to
// the broker too (publish does not check the connection), the mark fails, the transaction
// is gone and the relay's advisory locks with it; relay 2 (or relay 1's next pass) takes
// the keys and publishes from each key's oldest unpublished event again. Every committed
// event is delivered, with the id it committed with, and each key's first deliveries
// follow its commit order. (This passed on main: coverage, no hole found.)
func TestReview12_RelayConnectionKilledBetweenPublishAndMark(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := &killer{t: t, e: e, kills: 4}
	var want []string
	for i := range 12 {
		want = append(want, e.produce(t, fmt.Sprintf("k-%d", i), fmt.Sprintf("acct-%d", i%3), "x", "y")...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for range 2 {
		r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), pub, pgoutbox.WithBatchSize(5),
			pgoutbox.WithPollInterval(20*time.Millisecond), pgoutbox.WithRetryDelay(5*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	var lag time.Duration
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), pub)
	require.NoError(t, err)
	eventually(t, func() bool {
		l, err := r.Lag(context.Background())
		lag = l
		return err == nil && l == 0
	}, "every event marked published")
	cancel()
	wg.Wait()
	assert.Zero(t, lag)

	got := pub.delivered()
	seen := map[string]bool{}
	perKey := map[string][]string{}
	for _, m := range got {
		if !seen[m.ID] {
			seen[m.ID] = true
			perKey[m.OrderingKey] = append(perKey[m.OrderingKey], m.ID)
		}
	}
	assert.Len(t, seen, len(want), "every committed event delivered")
	for _, id := range want {
		assert.True(t, seen[id], "event %s delivered with the id it committed with", id)
	}
	assert.Greater(t, len(got), len(want), "the killed passes' messages were delivered again")
	seqs := commitOrder(t, e)
	for k, ids := range perKey {
		assert.Equal(t, seqs[k], ids, "key %s: first deliveries in commit order", k)
	}
}

// TestReview12_ABlockedKeyDoesNotStarveTheOthers: the package promises that a message the
// broker always refuses "holds its key back" (head-of-line per ordering key), and that
// every committed event is published at least once. But a pass takes the oldest
// unpublished rows (ORDER BY seq LIMIT batch size) before it looks at their keys: once a
// blocked key has a batch's worth of unpublished events, every pass takes only that key's
// rows, fails its head, and never reaches any other key. Schedule (batch size 5):
//  1. customer-42's first event goes to a queue that refuses it (deleted, a policy, a
//     message too large); its producer goes on: 5 more events of customer-42 commit
//     behind it;
//  2. an event of customer-7 commits;
//  3. the relay runs pass after pass.
//
// Every pass takes customer-42's 5 oldest rows, fails the first, publishes nothing else:
// customer-7's event is never published, nor is anything committed after it. One poison
// key stalls the whole outbox (any number of relays: each takes the same rows or skips
// them). On main customer-7's event is never published.
func TestReview12_ABlockedKeyDoesNotStarveTheOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.produce(t, "c42-0", "customer-42", "poison")
	for i := range 5 {
		e.produce(t, fmt.Sprintf("c42-%d", i+1), "customer-42", "queued")
	}
	healthy := e.produce(t, "c7", "customer-7", "healthy")
	rec := &recorder{fail: func(m outbox.Message, _ int) bool { return m.Type == "poison" }}
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), rec, pgoutbox.WithBatchSize(5))
	require.NoError(t, err)
	for range 10 {
		_, err := r.RelayOnce(context.Background())
		require.NoError(t, err)
	}
	var got []string
	for _, m := range rec.published() {
		got = append(got, m.ID)
	}
	assert.Contains(t, got, healthy[0], "customer-7's event is published while customer-42 is blocked")
}

// badErrPublisher takes every message but those of type "refused", which it fails with an
// error whose text is not UTF-8 (a broker's answer echoing binary bytes of the message).
type badErrPublisher struct {
	mu   sync.Mutex
	sent map[string]int
}

func (p *badErrPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if m.Type == "refused" {
			errs[i] = errors.New("broker refused payload prefix \xff\xfe\x00")
			continue
		}
		p.sent[m.ID]++
	}
	return errs
}

// TestReview12_APublishErrorTheTableCannotHoldDoesNotUndoThePass: the relay writes a
// refused message's error text into last_error in the pass's transaction, after the
// marks of the messages it published. An error text PostgreSQL cannot store (not UTF-8, or
// a NUL byte) fails that UPDATE; RelayOnce returns the error without committing, and the
// marks of every message the pass did publish roll back with it. Schedule: a pass takes
// acct-1's event (the broker takes it) and acct-2's (the broker refuses it, its error
// echoing binary bytes); the fail UPDATE errors; nothing commits; the next pass publishes
// acct-1's event again, and so on forever: endless duplicates, and no key of the batch
// ever progresses. On main acct-1's event is delivered at every pass.
func TestReview12_APublishErrorTheTableCannotHoldDoesNotUndoThePass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ok := e.produce(t, "k-1", "acct-1", "taken")
	e.produce(t, "k-2", "acct-2", "refused")
	pub := &badErrPublisher{sent: map[string]int{}}
	r, err := pgoutbox.New(e.pool, e.store.OutboxTable(), pub)
	require.NoError(t, err)
	var errs []error
	for range 3 {
		if _, err := r.RelayOnce(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	assert.Empty(t, errs, "passes commit what they published")
	pub.mu.Lock()
	defer pub.mu.Unlock()
	assert.Equal(t, 1, pub.sent[ok[0]], "acct-1's event is marked published once the broker took it")
}
