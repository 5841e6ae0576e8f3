package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// effects is a business table of one row per committed effect: a key done twice has two.
type effects struct {
	pool  *pgxpool.Pool
	table string
}

func newEffects(t *testing.T, pool *pgxpool.Pool) *effects {
	t.Helper()
	e := &effects{pool: pool, table: pgtest.Name("effects")}
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE %s (key text NOT NULL, run bigint NOT NULL)`, e.table))
	require.NoError(t, err)
	return e
}

func (e *effects) write(key string, run int64) pgstore.Write {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (key, run) VALUES ($1, $2)`, e.table), key, run)
		return err
	}
}

// runs returns the committed runs of every key.
func (e *effects) runs(t *testing.T) map[string][]int64 {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), fmt.Sprintf(`SELECT key, run FROM %s`, e.table))
	require.NoError(t, err)
	m := map[string][]int64{}
	for rows.Next() {
		var k string
		var r int64
		require.NoError(t, rows.Scan(&k, &r))
		m[k] = append(m[k], r)
	}
	require.NoError(t, rows.Err())
	return m
}

// load drives keys with callers guarded calls each (concurrent duplicates), every caller
// retrying its key until it gets an answer, and checks the effects: one per key, equal to
// every answer of that key. onCall, if not nil, sees every call's error as it happens.
type load struct {
	keys, callers int
	guard         *idem.Guard
	effects       *effects
	executions    atomic.Int64
	onCall        func(err error)
}

type answer struct {
	key string
	run int64
}

func (l *load) run(t *testing.T, deadline time.Duration) []answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range l.keys {
		key := fmt.Sprintf("key-%d", i)
		for range l.callers {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				run, err := l.call(ctx, key)
				if err != nil {
					t.Errorf("%s: no answer before the deadline: %v", key, err)
					return
				}
				mu.Lock()
				answers = append(answers, answer{key, run})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return answers
}

// call calls key until it gets an answer; it returns the answer's run. Each call has a
// deadline of 2 s, as a Lambda invocation would: the lease follows it, so a key whose
// owner's completion failed is free again soon.
func (l *load) call(ctx context.Context, key string) (int64, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, _, err := idem.Do(cctx, l.guard, idem.Request{Key: key}, func(ctx context.Context) (out, error) {
			run := l.executions.Add(1)
			return out{N: int(run)}, pgstore.Attach(ctx, l.effects.write(key, run))
		})
		cancel()
		if l.onCall != nil {
			l.onCall(err)
		}
		if err == nil {
			return int64(v.N), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// check asserts the invariants: every key's effect committed exactly once, and every
// answer is that effect's run.
func (l *load) check(t *testing.T, answers []answer) {
	t.Helper()
	runs := l.effects.runs(t)
	assert.Len(t, runs, l.keys, "every key's effect committed")
	for k, r := range runs {
		assert.Len(t, r, 1, "key %s committed %d effects", k, len(r))
	}
	assert.Len(t, answers, l.keys*l.callers, "every call answered")
	for _, a := range answers {
		if r := runs[a.key]; len(r) == 1 {
			assert.Equal(t, r[0], a.run, "key %s answered another run than the one committed", a.key)
		}
	}
}

// TestServerCrash crashes the server (immediate shutdown of every process) while guarded
// calls with attached writes run, lets the calls fail against it for a while, and restarts
// it. While it is down every error is a store error (or a key still in progress, or a lost
// lease: all retryable); afterwards every key's effect has committed exactly once and every
// caller got that effect's result.
func TestServerCrash(t *testing.T) {
	t.Parallel()
	server := pgtest.Private(t)
	pool := pgtest.PoolFor(t, server.URL(), func(c *pgxpool.Config) {
		c.MaxConns = 8
		c.ConnConfig.ConnectTimeout = time.Second
	})
	ctx := context.Background()
	table := pgtest.Name("idem")
	require.NoError(t, pgstore.CreateTable(ctx, pool, table))
	s, err := pgstore.New(pool, table)
	require.NoError(t, err)
	g, err := idem.New(s, "crash", idem.WithScope("test"), idem.WithLease(500*time.Millisecond), idem.WithLeaseMargin(500*time.Millisecond))
	require.NoError(t, err)

	var down atomic.Bool
	var calls, errorsWhileDown atomic.Int64
	var mu sync.Mutex
	unexpected := map[string]int{}
	l := &load{keys: 150, callers: 2, guard: g, effects: newEffects(t, pool)}
	l.onCall = func(err error) {
		calls.Add(1)
		if err == nil {
			return
		}
		if down.Load() {
			errorsWhileDown.Add(1)
		}
		if !errors.Is(err, idem.ErrStore) && !errors.Is(err, idem.ErrInProgress) && !errors.Is(err, idem.ErrLeaseLost) {
			mu.Lock()
			unexpected[err.Error()]++
			mu.Unlock()
		}
	}
	crashed := make(chan error, 1)
	go func() {
		for calls.Load() < 100 {
			time.Sleep(5 * time.Millisecond)
		}
		down.Store(true)
		if err := server.Crash(); err != nil {
			crashed <- err
			return
		}
		for errorsWhileDown.Load() < 50 { // the outage is seen by many calls
			time.Sleep(5 * time.Millisecond)
		}
		err := server.Restart(ctx)
		down.Store(false)
		crashed <- err
	}()
	answers := l.run(t, 2*time.Minute)
	require.NoError(t, <-crashed)
	assert.Empty(t, unexpected, "errors other than store errors, keys in progress and lost leases")
	assert.GreaterOrEqual(t, errorsWhileDown.Load(), int64(50))
	l.check(t, answers)
	t.Logf("%d calls, %d errors while down, %d handler executions for %d keys", calls.Load(), errorsWhileDown.Load(), l.executions.Load(), l.keys)
}

// TestSoak runs a few thousand guarded calls with concurrent duplicates against the shared
// server: every key runs once, commits its effect once, and every duplicate gets its
// result.
func TestSoak(t *testing.T) {
	t.Parallel()
	c := newCounter(nil)
	s, pool := newStore(t, c)
	c.db = pool
	g, err := idem.New(s, "soak", idem.WithScope("test"), idem.WithWait(30*time.Second, 5*time.Millisecond))
	require.NoError(t, err)
	l := &load{keys: 1000, callers: 3, guard: g, effects: newEffects(t, pool)}
	answers := l.run(t, 3*time.Minute)
	l.check(t, answers)
	assert.Equal(t, int64(l.keys), l.executions.Load(), "every key ran exactly once")
	n := c.take()
	t.Logf("%d calls: %v", len(answers), n)
	assert.Equal(t, l.keys, n["begin"], "one completion transaction per key")
	assert.Equal(t, l.keys, n["commit"])
}
