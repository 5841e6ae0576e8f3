// Package storetest is the behaviour suite every idemstore.Store must pass, as
// testing/fstest.TestFS is for file systems: [Run] drives a real idem.Guard over the store
// under test through new keys, replays, failures, in-flight refusals, lease takeovers,
// checkpoints, contention (many goroutines, one key: exactly one run), large and
// incompatible records, store failures and lost responses, a claim landing late after
// its owner's release, duplicate requests in one batch, and, when the store supports
// them, attached writes. Every store in this repository runs it (memstore, dynamo on
// DynamoDB Local, pgstore, redisstore); a third-party store proves itself the same way:
//
//	storetest.Run(t, storetest.Harness{
//		NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
//	})
//
// The guard passes its clock's time to the store (Claim's now), so the suite drives every
// store with a fake clock ([Clock]) and never sleeps for a lease to end. A store that
// deletes expired items on its own must not do so within the suite's run: [NewClock]
// starts in the year 2100.
package storetest
