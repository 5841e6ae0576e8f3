package redisstoretest_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
	"github.com/idemkit/idem/redisstore/redisstoretest"
)

// A guard on Redis in a test function: the store's keys have a prefix of the test's own on
// the server the test binary shares. The binary's TestMain calls redisstoretest.Main.
func ExampleNewStore() {
	test := func(t *testing.T) {
		store := redisstoretest.NewStore(t) // a key prefix of the test's own
		guard, err := idem.New(store, "render-report",
			idem.WithMaxResultSize(redisstore.DefaultMaxRecordSize))
		if err != nil {
			t.Fatal(err)
		}
		_ = guard
	}
	_ = test
}
