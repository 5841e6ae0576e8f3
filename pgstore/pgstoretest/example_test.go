package pgstoretest_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// A guard on PostgreSQL in a test function: the pool works in a schema of the test's own,
// where the handler's tables are created, and the store has an idempotency table of its
// own there. The test binary's TestMain calls pgstoretest.Main.
func ExampleNewStore() {
	test := func(t *testing.T) {
		pool := pgstoretest.Pool(t)            // a schema of the test's own
		store := pgstoretest.NewStore(t, pool) // an idempotency table in it
		guard, err := idem.New(store, "create-order")
		if err != nil {
			t.Fatal(err)
		}
		_ = guard
	}
	_ = test
}

// Open serves an example, which has no testing.TB: the same key in two schemas is two
// records, so neither run replays the other's.
func ExampleOpen() {
	ctx := context.Background()
	for _, worker := range []string{"first", "second"} {
		pool, closePool, err := pgstoretest.Open(ctx) // a schema of its own
		if err != nil {
			log.Fatal(err)
		}
		store, err := pgstore.New(pool, pgstore.DefaultTable)
		if err != nil {
			log.Fatal(err)
		}
		if err := pgstore.CreateTable(ctx, pool, pgstore.DefaultTable); err != nil {
			log.Fatal(err)
		}
		guard, err := idem.New(store, "run-job")
		if err != nil {
			log.Fatal(err)
		}
		got, replayed, err := idem.Do(ctx, guard, idem.Request{Key: "job-1"},
			func(ctx context.Context) (string, error) { return worker, nil })
		fmt.Println(got, replayed, err)
		if err := closePool(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// first false <nil>
	// second false <nil>
}
