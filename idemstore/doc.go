// Package idemstore is for the authors of idempotency stores: the [Store] interface that
// package idem's guard drives, the [Record] it stores, its statuses and encodings, and the
// errors a store answers with. It is to package idem what database/sql/driver is to
// database/sql: a handler author never imports it.
//
// A store keeps one [Record] per stored key and makes each operation atomic per key:
//   - a conditional claim: absent, expired, or lease-ended with the same checkpoint;
//   - completion, release, lease extension and checkpoints, conditional on the owner's
//     lease token.
//
// The stores in this repository (dynamo, memstore, pgstore, redisstore) implement it.
// Package storetest holds the behaviour suite that proves a store keeps the contract. A
// store runs it from its own test (see storetest.Run's example):
//
//	storetest.Run(t, storetest.Harness{
//		NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
//	})
//
// Times are time.Time. A store encodes them as it likes. It must round a record's ends
// (Expires, LeaseExpires) up, never down, when it stores them at a coarser resolution, so
// that no record ends earlier in the store than the guard decided.
//
// # Late writes
//
// Writes of one owner may arrive late, after later ones. A client's resend applies, and
// its first attempt lands afterwards: the AWS SDK resends a request whose connection
// broke. So the two writes an owner repeats never go back:
//   - An extension never lowers the stored lease end ([Store.Extend]). The owner's
//     watchdog counts on the latest end it was told of. A lowered end would let another
//     caller take the key over while the handler still runs.
//   - A checkpoint write never replaces a checkpoint with a higher number
//     ([Record.CheckpointSeq], [Store.SetCheckpoint]). The guard numbers an owner's
//     checkpoints in order and sends one at a time. A condition on the stored value would
//     not do, since values repeat: with A, B, A, a late B would land on the second A.
//
// # Why the claim rules
//
// [Store.Claim] takes over a lease-ended record only on these terms:
//   - The checkpoint's number refuses a late claim that carries an equal value recorded
//     earlier. The takeover claims of one owner share a token but carry different
//     checkpoints (A, B, A), and an earlier one may land after the record moved on.
//   - The fingerprint keeps a checkpoint, which records effects of its own request, on
//     that request's record. The guard checks the fingerprint of the record its claim
//     read. Another request's record may replace it before the claim that carries the
//     checkpoint applies.
//   - A record with a checkpoint is taken over only by a claim that carries the
//     checkpoint into the new record. So it is never lost with a claim's answer: the
//     guard claims again with the checkpoint of the lease-ended record a claim returns.
//   - The token rule refuses a claim whose owner has released the key since. A network
//     can deliver it late, after the resend's owner ran, failed and released. It must
//     not hold the key again for a lease nobody owns.
//
// # Tombstones and clock skew
//
// [Store.Release] keeps a tombstone whose lease ended at the releaser's now. A late claim
// is refused by its time only if its sender's clock is not ahead of the releaser's:
//   - A late claim from a clock ahead (within the lease margin) carries a now past the
//     release's, and takes the tombstone over. It holds the key, for nobody, until its own
//     lease ends (a lease from its now, on its clock). Nothing runs twice, and the key is
//     free after that.
//   - A caller whose clock runs behind the releaser's may be refused for as long as the
//     skew, and is told the key is in progress until then, whatever its payload. The guard
//     recognises the tombstone ([Record.Released]). But one with a checkpoint keeps the
//     key for the released request's payload, as any record with a checkpoint does.
package idemstore
