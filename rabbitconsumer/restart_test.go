package rabbitconsumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
	"github.com/idemkit/idem/rabbitconsumer"
)

// On PostgreSQL, with the business row written in the completion's transaction
// (pgstore.Attach): the broker is stopped and restarted, then killed and restarted, while
// two consumers run. Every message's row is written once, and none is lost.
func TestBrokerRestartPostgres(t *testing.T) {
	brokerURL(t)
	pool := pgstoretest.Pool(t)
	store := pgstoretest.NewStore(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := pool.Exec(ctx, `CREATE TABLE payments (message_id text NOT NULL, body text NOT NULL)`)
	require.NoError(t, err)
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n))
		return n
	}

	const n = 300
	queue, dlq := declare(t)
	var msgs []amqp.Publishing
	for i := range n {
		msgs = append(msgs, message(fmt.Sprint("p", i)))
	}
	publish(t, queue, msgs...)

	handler := func(ctx context.Context, d amqp.Delivery) error {
		time.Sleep(2 * time.Millisecond) // the business work
		return pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO payments (message_id, body) VALUES ($1, $2)`, d.MessageId, string(d.Body))
			return err
		})
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		c, err := rabbitconsumer.New(newGuard(t, store), queue, handler,
			rabbitconsumer.WithPrefetch(10), rabbitconsumer.WithReconnectDelay(100*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, c.Run(runCtx, broker.URL()))
		}()
	}
	defer func() { stop(); wg.Wait() }()

	eventually(t, time.Minute, func() bool { return count() >= n/4 }, "a quarter processed")
	require.NoError(t, broker.Shutdown())
	require.NoError(t, broker.Restart(ctx))
	eventually(t, time.Minute, func() bool { return count() >= n/2 }, "half processed")
	require.NoError(t, broker.Kill())
	require.NoError(t, broker.Restart(ctx))
	eventually(t, 2*time.Minute, func() bool { return count() >= n && ready(t, queue) == 0 }, "all processed")
	stop()
	wg.Wait()
	drained(t, queue)
	drained(t, dlq)

	rows, err := pool.Query(ctx, `SELECT message_id, count(*) FROM payments GROUP BY message_id HAVING count(*) > 1`)
	require.NoError(t, err)
	dup, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID string
		N  int
	}])
	require.NoError(t, err)
	assert.Empty(t, dup, "payments written twice")
	assert.Equal(t, n, count())
}
