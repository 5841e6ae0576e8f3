package rabbitconsumer_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/rabbitconsumer"
)

// The package documentation's usage, in a service: a consumer of the orders queue on
// PostgreSQL, whose handler writes its row in the completion's transaction, until SIGTERM.
// It dials a broker, so it claims no output.
func Example_service() {
	serve := func(pool *pgxpool.Pool) error {
		apply := func(ctx context.Context, body []byte) error {
			return pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO orders (body) VALUES ($1)`, body)
				return err
			})
		}
		store, err := pgstore.New(pool, pgstore.DefaultTable)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		guard, err := idem.New(store, "apply-order", idem.WithHeartbeat(10*time.Second))
		if err != nil {
			return err
		}
		c, err := rabbitconsumer.New(guard, "orders", func(ctx context.Context, d amqp.Delivery) error {
			return apply(ctx, d.Body) // attach its writes with pgstore.Attach or dynamo.Attach
		})
		if err != nil {
			return err
		}
		err = c.Run(ctx, os.Getenv("AMQP_URL")) // reconnects until ctx ends
		return err
	}
	_ = serve
}
