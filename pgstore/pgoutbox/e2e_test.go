package pgoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/outboxe2e"
	"github.com/idemkit/idem/internal/sqsfake"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
	"github.com/idemkit/idem/pgstore/pgoutbox"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

const (
	queueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
	queueARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
)

// crashing publishes, then, every fourth call, kills the relay's connections before the
// relay can mark what was published: a relay crash between publish and mark, as the
// database sees it.
type crashing struct {
	inner outbox.Publisher
	admin *pgxpool.Pool
	app   string
	calls *atomic.Int64
	kills *atomic.Int64
}

func (c crashing) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := c.inner.Publish(ctx, msgs)
	if c.calls.Add(1)%4 == 0 {
		var n int
		_ = c.admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, c.app).Scan(&n)
		c.kills.Add(int64(n))
	}
	return errs
}

// TestEndToEnd runs producer → relays → SQS → consumer on PostgreSQL, with faults: relays
// crash between publish and mark, SQS answers get lost or refuse messages, relays restart,
// three run at once. Every committed event is delivered at least once, every consumer
// effect happens exactly once, each ordering key's events arrive first in commit order,
// and no event of a rolled-back or fenced-off run is ever delivered.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	url := pgtest.URL(t)
	clock := storetest.NewSettableClock()
	e := newEnv(t, idem.WithClock(clock), idem.WithLease(time.Minute))
	ctx := context.Background()
	fake := sqsfake.New(t, queueURL, queueARN, sqsfake.EveryNth)
	pub := sqspub.New(fake)

	// The consumer: sqs.New with default options, deduplicating on Idempotency-Key.
	consumer := outboxe2e.NewConsumer(t, pgstoretest.NewStore(t, admin))

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Add(1)
	go func() { // the consumer: Lambda's event source mapping, in short
		defer wg.Done()
		fake.Consume(runCtx, consumer.Handle)
	}()

	// Three relay slots; each restarts its relay every few passes on a new pool, whose
	// connections a crashing publisher kills now and then.
	var calls, kills, restarts atomic.Int64
	for slot := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gen := 0; runCtx.Err() == nil; gen++ {
				app := fmt.Sprintf("relay-%d-%d", slot, gen)
				pool := pgtest.PoolFor(t, url, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = app })
				// Each generation ends after a few committed passes (not after a time, which
				// a loaded machine could make too short for any pass to finish).
				rctx, cancel := context.WithCancel(runCtx)
				var passes atomic.Int64
				r, err := pgoutbox.New(pool, e.store.OutboxTable(), crashing{inner: pub, admin: admin, app: app, calls: &calls, kills: &kills},
					pgoutbox.WithBatchSize(8), pgoutbox.WithPollInterval(50*time.Millisecond), pgoutbox.WithRetryDelay(5*time.Millisecond),
					pgoutbox.WithHooks(pgoutbox.Hooks{OnPass: func(pgoutbox.Pass) {
						if passes.Add(1) == int64(2+slot) {
							cancel()
						}
					}}))
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				_ = r.Run(rctx)
				cancel()
				pool.Close()
				restarts.Add(1)
			}
		}()
	}

	record := func(ctx context.Context, key, typ string) (string, error) {
		return outbox.Record(ctx, outbox.Event{Destination: queueURL, OrderingKey: key, Type: typ, Payload: []byte(`{"amount":1}`)})
	}
	// Runs that must never be delivered: fenced off (the new owner's event commits), and
	// rolled back (the handler fails, or an attached write does).
	outboxe2e.FencedOff(t, ctx, e.guard, clock, 2*time.Minute, 5, "acct-f", record)
	outboxe2e.RolledBack(t, ctx, e.guard, 10, "acct-0", record, func(ctx context.Context) error {
		return pgstore.Attach(ctx, func(context.Context, pgx.Tx) error { return errors.New("declined") })
	})
	// Committed runs from four producers, each request sent twice (the replay records
	// nothing).
	var pwg sync.WaitGroup
	for p := range 4 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range 40 {
				req := idem.Request{Key: fmt.Sprintf("order-%d-%d", p, i)}
				for range 2 {
					_, _, err := idem.Do(ctx, e.guard, req, func(ctx context.Context) (string, error) {
						acct := fmt.Sprintf("acct-%d", i%5)
						if _, err := record(ctx, acct, "Placed"); err != nil {
							return "", err
						}
						_, err := record(ctx, acct, "Charged")
						return "ok", err
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	pwg.Wait()

	committed := commitOrder(t, e)
	var all []string
	for _, ids := range committed {
		all = append(all, ids...)
	}
	require.Len(t, all, 4*40*2+5)
	eventually(t, func() bool {
		return len(consumer.Effects()) >= len(all)
	}, "every committed event consumed")
	stop()
	wg.Wait()

	delivered := fake.Delivered()
	duplicates, badKeys := outboxe2e.Check(t, delivered, committed, consumer.Effects())
	for _, k := range badKeys {
		calls := map[string][]string{}
		for _, m := range delivered {
			id := aws.ToString(m.MessageAttributes[outbox.IDAttribute].StringValue)
			calls[id] = append(calls[id], m.MessageId)
		}
		rows, _ := admin.Query(ctx, `SELECT seq, id, committed_at, published_at, attempts FROM "`+e.store.OutboxTable()+`" WHERE ordering_key = $1 ORDER BY seq`, k)
		for rows.Next() {
			var seq int64
			var id string
			var c, p time.Time
			var a int
			_ = rows.Scan(&seq, &id, &c, &p, &a)
			t.Logf("row seq %d id %s committed %s published %s attempts %d deliveries %v", seq, id, c.Format("15:04:05.000000"), p.Format("15:04:05.000000"), a, calls[id])
		}
		rows.Close()
	}

	st := fake.Stats()
	t.Logf("events %d, deliveries %d (duplicates %d), SQS calls %d: refused %d, entries refused %d, answers lost %d; relay connections killed after publish %d, relay restarts %d",
		len(all), len(delivered), duplicates, st.Calls, st.Refused, st.EntriesFailed, st.LostAnswers, kills.Load(), restarts.Load())
	assert.Positive(t, duplicates, "faults made duplicates the consumer dropped")
	assert.Positive(t, st.LostAnswers)
	assert.Positive(t, kills.Load())
	assert.Positive(t, restarts.Load())
}
