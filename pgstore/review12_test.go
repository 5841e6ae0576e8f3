package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
)

// TestReview12_OutboxKeysInOppositeOrderDoNotDeadlock: two transfers in opposite
// directions, each a guarded handler that records one event per account (ordering keys
// "acct-1" and "acct-2"), in the order its business logic meets them. The producer takes
// each ordering key's advisory lock at its event's INSERT and holds it to the commit, so
// two completions that insert the same two keys in opposite orders deadlock: PostgreSQL
// aborts one (40P01), its completion commits nothing, the guard releases the key, and the
// handler, which did its work, must run again. Schedule:
//  1. run A (key t-1) records acct-1 then acct-2; run B (key t-2) records acct-2 then
//     acct-1; both handlers return;
//  2. A's completion inserts acct-1's event (lock acct-1); B's inserts acct-2's (lock
//     acct-2); the attached write between the two events only pins this interleaving,
//     which concurrent completions meet on their own under load;
//  3. A's INSERT of acct-2 waits for B, B's INSERT of acct-1 waits for A: deadlock.
//
// Neither request did anything wrong: both should complete, their handlers having run
// once. On main one of them fails with idem.ErrStore (a deadlock), so its handler runs a
// second time when its caller retries: double execution, caused by the library's lock
// order, not the handler. Taking a completion's producer locks in one canonical order
// (sorted lock keys) before its inserts would avoid it.
func TestReview12_OutboxKeysInOppositeOrderDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, nil)
	ctx := context.Background()
	require.NoError(t, pgstore.CreateOutboxTable(ctx, pool, s.OutboxTable()))
	g, err := idem.New(s, "transfer")
	require.NoError(t, err)

	var arrived sync.WaitGroup
	arrived.Add(2)
	bothIn := make(chan struct{})
	go func() { arrived.Wait(); close(bothIn) }()
	// pin waits, inside the completion's transaction, until both completions hold their
	// first ordering key's lock (bounded, so a test that no longer deadlocks cannot hang;
	// by half the time left to the completion's own deadline, so that a completion that
	// waited here for one that cannot arrive, as a fixed lock order makes it, still has
	// the time to commit).
	var pinned atomic.Int32
	pin := func(ctx context.Context, _ pgx.Tx) error {
		if pinned.Add(1) > 2 { // a retry's completion: nothing to pin
			return nil
		}
		arrived.Done()
		bound := 10 * time.Second
		if d, ok := ctx.Deadline(); ok {
			bound = min(bound, time.Until(d)/2)
		}
		select {
		case <-bothIn:
		case <-time.After(bound):
		}
		return nil
	}
	var mu sync.Mutex
	runs := map[string]int{}
	transfer := func(key, from, to string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			mu.Lock()
			runs[key]++
			mu.Unlock()
			if _, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: from, Type: "Debited"}); err != nil {
				return "", err
			}
			if err := pgstore.Attach(ctx, pin); err != nil {
				return "", err
			}
			_, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: to, Type: "Credited"})
			return "done", err
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, tr := range [][3]string{{"t-1", "acct-1", "acct-2"}, {"t-2", "acct-2", "acct-1"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = idem.Do(ctx, g, idem.Request{Key: tr[0]}, transfer(tr[0], tr[1], tr[2]))
		}()
	}
	wg.Wait()
	assert.NoError(t, errs[0], "transfer t-1 completes")
	assert.NoError(t, errs[1], "transfer t-2 completes")
	// The caller of a failed transfer retries: its handler runs a second time.
	for i, key := range []string{"t-1", "t-2"} {
		if errs[i] != nil {
			_, _, err := idem.Do(ctx, g, idem.Request{Key: key}, transfer(key, "acct-9", "acct-8"))
			require.NoError(t, err)
		}
	}
	assert.Equal(t, map[string]int{"t-1": 1, "t-2": 1}, runs, "each transfer's handler runs once")
}

// TestReview12_OutboxEventThePostgreSQLStoreCannotCommitIsRefusedAtRecord: outbox.Record
// promises that "a store that cannot commit it with the record refuses here" (at the
// call, wrapping idemstore.ErrInvalidAttach), before the handler does its work. pgstore
// cannot store a text value holding a NUL byte (SQLSTATE 22021) nor a jsonb string holding
// \u0000 (22P05); and a header value that is not UTF-8 is silently rewritten by
// json.Marshal (U+FFFD), so the relay would publish another header than the one recorded.
// Schedule: a handler records such an event (Record answers an id, no error), does its
// work, returns; the completion's INSERT fails with a data exception, which the store
// reports as a permanent refusal: nothing commits, the key is released, and every retry
// runs the handler again and fails again at its completion (a poison key), or, with
// idem.OnRefused, stores the refusal's answer although the handler had nothing refused.
// On main Record accepts all three.
func TestReview12_OutboxEventThePostgreSQLStoreCannotCommitIsRefusedAtRecord(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, nil)
	ctx := context.Background()
	require.NoError(t, pgstore.CreateOutboxTable(ctx, pool, s.OutboxTable()))
	g, err := idem.New(s, "bad-event")
	require.NoError(t, err)
	for name, e := range map[string]outbox.Event{
		"NULInType":             {Destination: "q", OrderingKey: "c-1", Type: "Order\x00Placed"},
		"NULInHeader":           {Destination: "q", OrderingKey: "c-1", Type: "OrderPlaced", Headers: map[string]string{"tenant": "t\x001"}},
		"InvalidUTF8InHeader":   {Destination: "q", OrderingKey: "c-1", Type: "OrderPlaced", Headers: map[string]string{"tenant": "t\xff1"}},
		"InvalidUTF8InOrderKey": {Destination: "q", OrderingKey: "c-\xff", Type: "OrderPlaced"},
	} {
		t.Run(name, func(t *testing.T) {
			runs := 0
			var recErr error
			_, _, doErr := idem.Do(ctx, g, idem.Request{Key: name}, func(ctx context.Context) (string, error) {
				runs++
				_, recErr = outbox.Record(ctx, e)
				if recErr != nil {
					return "", recErr
				}
				return "ok", nil
			})
			if recErr != nil {
				assert.ErrorIs(t, recErr, idemstore.ErrInvalidAttach, "refused at the call, as Record documents")
				return
			}
			// Accepted at Record: it must then commit as recorded.
			require.NoError(t, doErr, "Record accepted the event; its completion must commit it")
			sk, err := g.StoredKey(idem.Request{Key: name})
			require.NoError(t, err)
			var typ, key, tenant string
			require.NoError(t, pool.QueryRow(ctx, `SELECT type, ordering_key, coalesce(headers->>'tenant', '') FROM `+
				pgx.Identifier{s.OutboxTable()}.Sanitize()+` WHERE stored_key = $1`, sk).Scan(&typ, &key, &tenant))
			assert.Equal(t, []string{e.Type, e.OrderingKey, e.Headers["tenant"]}, []string{typ, key, tenant},
				"the event is stored, and relayed, as it was recorded")
			assert.Equal(t, 1, runs)
		})
	}
}

// TestReview12_BatchCompletionCommitsNoEventOfATakenOverRun: a batch of three claims;
// the handlers record an event each; before the batch settles, b-2's lease ends and
// another owner takes b-2 over, records its own event and completes. Schedule: Claim
// (b-1, b-2, b-3), three DoClaimed runs each Record an event, the clock passes the lease,
// Do(b-2) takes over and completes with event NewOwner, then Settle sends the batch
// completion (one transaction). Only the runs that complete their record commit events:
// b-1's and b-3's from the batch, NewOwner from the takeover, never the fenced-off b-2
// run's. (This passed on main: coverage, no hole found.)
func TestReview12_BatchCompletionCommitsNoEventOfATakenOverRun(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, nil)
	ctx := context.Background()
	require.NoError(t, pgstore.CreateOutboxTable(ctx, pool, s.OutboxTable()))
	clock := storetest.NewSettableClock()
	g, err := idem.New(s, "pay", idem.WithClock(clock), idem.WithLease(time.Minute))
	require.NoError(t, err)

	// A Lambda invocation's deadline, within the lease: the outcomes wait for Settle.
	lctx, cancel := context.WithDeadline(ctx, clock.Now().Add(50*time.Second))
	defer cancel()
	reqs := []idem.Request{{Key: "b-1"}, {Key: "b-2"}, {Key: "b-3"}}
	b := g.Claim(lctx, reqs)
	for i, r := range reqs {
		_, _, err := idem.DoClaimed(lctx, b, i, func(ctx context.Context) (string, error) {
			_, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: "acct", Type: "Batch-" + r.Key})
			return "batch", err
		})
		require.NoError(t, err)
	}
	clock.Advance(2 * time.Minute) // the batch's leases end: it looks crashed
	v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "b-2"}, func(ctx context.Context) (string, error) {
		_, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: "acct", Type: "NewOwner"})
		return "new owner", err
	})
	require.NoError(t, err)
	require.Equal(t, "new owner", v, "replayed %v", replayed)
	require.False(t, replayed)
	errs := b.Settle(ctx)
	require.Len(t, errs, 3)
	assert.ErrorIs(t, errs[1], idem.ErrLeaseLost, "the fenced-off run's completion")

	var types []string
	for _, r := range outboxRows(t, pool, s.OutboxTable()) {
		types = append(types, r.Type)
	}
	assert.NotContains(t, types, "Batch-b-2", "a taken-over run commits none of its events")
	assert.Contains(t, types, "NewOwner")
	for i, err := range errs {
		if err == nil {
			assert.Contains(t, types, "Batch-"+reqs[i].Key, "a batch run that completed commits its event")
		}
	}
	got, replayed, err := idem.Do(ctx, g, idem.Request{Key: "b-2"}, func(context.Context) (string, error) { return "ran again", nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "new owner", got, "retries get the new owner's result, whose event committed")
}
