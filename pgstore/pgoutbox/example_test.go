package pgoutbox_test

import (
	"context"
	"log"
	"log/slog"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox/sqspub"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgoutbox"
)

// ExampleNew runs a relay beside the functions that record events with pgstore: it
// publishes the outbox's events to SQS as they commit, and reports the outbox's lag.
// Run as many as you like; each ordering key's events still go out in commit order.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	var client *awssqs.Client // awssqs.NewFromConfig(cfg)

	relay, err := pgoutbox.New(pool, pgstore.DefaultTable+pgstore.OutboxSuffix, sqspub.New(client),
		pgoutbox.WithHooks(pgoutbox.Hooks{
			OnLag: func(lag time.Duration) { slog.Info("outbox", "lag_ms", lag.Milliseconds()) },
		}))
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(relay.Run(ctx)) // until ctx ends
}
