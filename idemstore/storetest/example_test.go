package storetest_test

import (
	"testing"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// A store's own test runs the suite with a constructor for an empty store; here the
// in-memory store. In a _test.go file the function literal is a TestXxx function.
// Set Harness.Batch to run it again through the batch path.
func ExampleRun() {
	test := func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
		})
	}
	_ = test
}
