package pgoutbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// env is a records table with its outbox on the shared server, and a guard over them.
type env struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	guard *idem.Guard
}

func newEnv(t *testing.T, opts ...idem.Option) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	store := pgstoretest.NewStore(t, pool)
	require.NoError(t, pgstore.CreateOutboxTable(context.Background(), pool, store.OutboxTable()))
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+`"`+store.OutboxTable()+`"`)
	})
	g, err := idem.New(store, "orders", opts...)
	require.NoError(t, err)
	return &env{pool: pool, store: store, guard: g}
}

// produce completes key's run, recording one event per type on orderingKey.
func (e *env) produce(t *testing.T, key, orderingKey string, types ...string) []string {
	t.Helper()
	var ids []string
	_, _, err := idem.Do(context.Background(), e.guard, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
		ids = ids[:0]
		for _, typ := range types {
			id, err := outbox.Record(ctx, outbox.Event{Destination: "q", OrderingKey: orderingKey, Type: typ, Payload: []byte(`{"n":1}`)})
			if err != nil {
				return "", err
			}
			ids = append(ids, id)
		}
		return "ok", nil
	})
	require.NoError(t, err)
	return ids
}

// recorder is a publisher that records what it was handed, failing messages fail says.
type recorder struct {
	mu   sync.Mutex
	sent []outbox.Message // every message handed over, in order, failed ones included
	ok   []outbox.Message // those reported published
	fail func(m outbox.Message, attempt int) bool
	seen map[string]int
}

func (r *recorder) Publish(_ context.Context, msgs []outbox.Message) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]int{}
	}
	keys := map[string]bool{}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if keys[m.OrderingKey] {
			panic("two messages of one ordering key in one call")
		}
		keys[m.OrderingKey] = true
		r.seen[m.ID]++
		r.sent = append(r.sent, m)
		if r.fail != nil && r.fail(m, r.seen[m.ID]) {
			errs[i] = fmt.Errorf("refused %s", m.ID)
			continue
		}
		r.ok = append(r.ok, m)
	}
	return errs
}

func (r *recorder) published() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Message(nil), r.ok...)
}

// eventually waits up to three minutes (a loaded machine) for cond, polling.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
