package storetest_test

import (
	"testing"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// A store's own test runs the suite with a constructor for an empty store. Here the
// in-memory store, through the batch path as well as Do.
func ExampleRun() {
	test := func(t *testing.T) {
		for _, batch := range []bool{false, true} {
			storetest.Run(t, storetest.Harness{
				NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
				Batch:    batch,
			})
		}
	}
	_ = test // in a _test.go file: func TestBehaviour(t *testing.T) { ... }
}
