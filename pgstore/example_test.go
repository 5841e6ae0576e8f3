package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Example guards an order creation whose INSERT commits in one transaction with the
// completed record: a duplicate request replays the order and inserts nothing. It needs a
// PostgreSQL server (DATABASE_URL), so it claims no output.
func Example() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	// No named prepared statements: RDS Proxy does not pin.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.CreateTable(ctx, pool, pgstore.DefaultTable); err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.DefaultTable)
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "create-order")
	if err != nil {
		log.Fatal(err)
	}
	for range 2 { // the client retries
		req := idem.Request{Key: "order-7f3a"}
		o, replayed, err := idem.Do(ctx, guard, req, func(ctx context.Context) (order, error) {
			o := order{ID: "ord-42", Amount: 1250}
			err := pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ($1, $2)`,
					o.ID, o.Amount)
				return err
			})
			return o, err
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(o.ID, replayed)
	}
}

// ExampleSchema prints the table the store needs, for a migration.
func ExampleSchema() {
	fmt.Print(pgstore.Schema(pgstore.DefaultTable))
	// Output:
	// -- idem pgstore schema 2
	// CREATE TABLE IF NOT EXISTS "idempotency" (
	//     id               text        PRIMARY KEY, -- "<scope>.<operation>#<sha256 hex>": never the caller's raw key
	//     status           text        NOT NULL,    -- INPROGRESS, COMPLETED or FAILED
	//     expires_at       timestamptz,             -- past it the record counts as absent; NULL: never
	//     lease_expires_at timestamptz,             -- end of an INPROGRESS record's lease; NULL: none
	//     validation       text,                    -- hash of the request fingerprint
	//     data             bytea,                   -- the stored result, encoded
	//     encoding         text,                    -- json, json+gzip, none, error
	//     lease_token      text,                    -- the lease owner's random token (fencing)
	//     checkpoint       text,                    -- the owner's last progress marker
	//     version          integer     NOT NULL,    -- record schema version
	//     checkpoint_seq   bigint      NOT NULL DEFAULT 0 -- the checkpoint's number: late writes never replace a later one
	// );
	// COMMENT ON TABLE "idempotency" IS 'idem pgstore schema 2';
	// -- Only for deleting expired records (see DeleteExpired); claims and reads use the key.
	// CREATE INDEX IF NOT EXISTS "idempotency_expires_at" ON "idempotency" (expires_at);
}

// ExampleUpgradeStatement prints the migration a table of schema 1 needs.
func ExampleUpgradeStatement() {
	fmt.Print(pgstore.UpgradeStatement(pgstore.DefaultTable))
	// Output:
	// ALTER TABLE "idempotency" ADD COLUMN IF NOT EXISTS checkpoint_seq bigint NOT NULL DEFAULT 0;
	// COMMENT ON TABLE "idempotency" IS 'idem pgstore schema 2';
}

// ExampleDeleteExpiredStatement prints the housekeeping statement to schedule.
func ExampleDeleteExpiredStatement() {
	fmt.Println(pgstore.DeleteExpiredStatement(pgstore.DefaultTable))
	// Output:
	// DELETE FROM "idempotency" WHERE expires_at < now() - interval '5 minutes'
}
