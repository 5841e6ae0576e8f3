package idemstore_test

import (
	"fmt"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// A store's claim condition, as [idemstore.Record.ClaimableBy] states it: a live record
// refuses a claim; once its lease ends, a claim carrying its checkpoint takes it over.
func ExampleRecord_ClaimableBy() {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	held := &idemstore.Record{
		Key:          "orders-api.create-order#9f86d081",
		Status:       idemstore.StatusInProgress,
		Expires:      now.Add(time.Hour),
		LeaseExpires: now.Add(30 * time.Second),
		Checkpoint:   "charged",
	}
	claim := &idemstore.Record{Key: held.Key, Status: idemstore.StatusInProgress, Checkpoint: "charged"}
	fmt.Println(held.ClaimableBy(claim, now))
	fmt.Println(held.ClaimableBy(claim, now.Add(time.Minute)))
	fmt.Println(held.ClaimableBy(&idemstore.Record{Key: held.Key}, now.Add(time.Minute)))
	// Output:
	// false
	// true
	// false
}
