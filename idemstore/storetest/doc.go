// Package storetest is the behaviour suite every idemstore.Store must pass, as
// testing/fstest.TestFS is for file systems.
//
// [Run] drives a real idem.Guard over the store under test. Its cases, one file each:
//   - claim.go: new keys, replays, mismatches, in-flight refusals and waits, expiry,
//     contention (many goroutines, one key: exactly one run);
//   - settle.go: release on error, remembered failures, large and incompatible records;
//   - checkpoint.go and takeover.go: checkpoints and lease takeovers;
//   - checkpointvalue.go: checkpoints that carry a value, across takeovers and failures;
//   - failures.go and faulty.go: store failures and lost responses;
//   - late.go and lateclaim.go: writes and claims that land late, after later ones;
//   - batchdup.go: duplicate requests in one batch;
//   - attach.go: attached writes, when the store supports them.
//
// Every store in this repository runs it (memstore, dynamo on DynamoDB Local, pgstore,
// redisstore). A third-party store proves itself the same way:
//
//	storetest.Run(t, storetest.Harness{
//		NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
//	})
//
// The guard passes its clock's time to the store (Claim's now). So the suite drives every
// store with a [SettableClock] and never sleeps for a lease to end. A store that deletes
// expired items on its own must not do so within the suite's run: the clocks start in the
// year 2100. [SimulatedClock] and [SkewedClock] serve the guard's own tests.
package storetest
