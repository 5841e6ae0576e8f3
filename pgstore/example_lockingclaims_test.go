package pgstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// A store sharing its table with a writer whose sessions run with synchronous_commit off
// (a batch job tuned for throughput, say): every claim locks the record it meets, so a
// replay is answered only once its own commit has flushed the WAL, the replayed
// completion's included. (It runs on the test binary's PostgreSQL, in a schema of its own:
// see package pgstoretest.)
func ExampleWithLockingClaims() {
	ctx := context.Background()
	pool, closePool, err := pgstoretest.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := closePool(); err != nil { // drops the schema
			log.Fatal(err)
		}
	}()
	if err := pgstore.CreateTable(ctx, pool, pgstore.DefaultTable); err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.DefaultTable, pgstore.WithLockingClaims())
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "create-order")
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		id, replayed, err := idem.Do(ctx, guard, idem.Request{Key: "order-7f3a"},
			func(context.Context) (string, error) { return "ord-42", nil })
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, replayed)
	}
	// Output:
	// ord-42 false
	// ord-42 true
}
