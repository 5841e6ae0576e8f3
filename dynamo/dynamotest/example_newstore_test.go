package dynamotest_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo/dynamotest"
)

// A guard on DynamoDB Local in a test function: the store has a table of its own on the
// server shared by the test binary. It needs Java, so it claims no output.
func ExampleNewStore() {
	test := func(t *testing.T) {
		store := dynamotest.NewStore(t) // a table of its own on the shared DynamoDB Local
		guard, err := idem.New(store, "create-order")
		if err != nil {
			t.Fatal(err)
		}
		_ = guard
	}
	_ = test
}
