package memstore_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// The zero value of a Store is ready to use, for tests of a guarded function.
func Example() {
	var store memstore.Store
	g, err := idem.New(&store, "create-order")
	if err != nil {
		panic(err)
	}
	for range 2 {
		id, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "order-1"},
			func(context.Context) (string, error) { return "ord_42", nil })
		fmt.Println(id, replayed, err)
	}
	// Output:
	// ord_42 false <nil>
	// ord_42 true <nil>
}
