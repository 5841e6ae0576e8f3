// Package idem makes AWS Lambda handlers idempotent. A guarded handler runs at most once
// per idempotency key within the key's expiry window. Every retry or duplicate delivery
// gets the first run's result back, without running the handler again.
//
// # Mental model
//
// Each key has one record in a store: DynamoDB in production (package dynamo), an
// in-memory one in tests (package memstore), PostgreSQL and Redis in their modules.
//
// A call claims the key with one conditional write that succeeds only if no live record
// holds it. The caller so becomes the owner of a lease, marked by a random token. The
// owner runs the handler. Then it completes the record with the result, or releases it on
// failure so the next retry runs again. Both writes are conditional on the token. So an
// owner whose lease expired and was taken over never overwrites its successor
// ("fencing").
//
// Every other caller finds the live record in the claim's own response:
//   - a completed record is replayed;
//   - an in-progress one is refused with [ErrInProgress], or waited for ([WithWait]);
//   - a record written for another request fingerprint is refused with
//     [ErrPayloadMismatch].
//
// The record's life:
//
//	absent ──claim──► INPROGRESS ──ok──► COMPLETED ──expiry──► absent
//	  ▲                  │  └── lease ends (crash, timeout) ──► may be claimed again
//	  └──error: release──┘
//
// A new key costs two store round trips (claim, complete), a replay or an in-flight
// duplicate one, and a warm local-cache replay ([WithCache]) none. Stored keys are
// "<scope>.<operation>#<sha256 hex>": raw keys never reach the store. The scope is the
// Lambda function's name unless [WithScope] sets it ([DefaultScope] outside Lambda), so two
// functions sharing a table never share records.
//
// # Usage
//
// From [Example_dynamo]:
//
//	store, err := dynamo.New(dynamodb.NewFromConfig(cfg), "idempotency")
//	if err != nil {
//		return err
//	}
//	guard, err := idem.New(store, "create-order", idem.WithExpiry(24*time.Hour))
//	if err != nil {
//		return err
//	}
//	order, replayed, err := idem.Do(ctx, guard, idem.Request{Key: key, Fingerprint: body},
//		func(ctx context.Context) (Order, error) { return createOrder(ctx, body) })
//
// Batch consumers (SQS) claim all their requests at once with [Guard.Claim], run each with
// [DoClaimed] and record every outcome with [Batch.Settle]. On a batch store (see package
// idemstore), a batch of new keys costs two round trips in all.
//
// Handlers can:
//   - record progress with [Checkpoint], and read it after a takeover with
//     [LastCheckpoint]. A failed or panicking handler's release keeps the checkpoint for
//     the retry, and a takeover carries it into the new owner's record. With
//     [CheckpointValue] a checkpoint carries a value, encoded with the guard's codec, that
//     the next owner gets back from [LastCheckpointValue].
//   - attach their own store writes to the completion with [Attach]. The business effect
//     and the record then commit together or not at all.
//
// # Leases
//
// A claim's lease ends at ctx's deadline plus [WithLeaseMargin]. Without a deadline it
// lasts [WithLease] plus the margin. [WithMaxLease] caps it either way. The margin is the
// clock skew between callers that the lease tolerates.
//
// The handler's context never outlives the lease. It ends at the lease end less the
// margin at the latest, with a cause wrapping [ErrLeaseLost]. So a handler that stops when
// its context ends never runs alongside a caller that took its key over. [WithHeartbeat]
// extends the lease for long work.
//
// # Errors
//
// A [*StoreError] names the store operation that failed:
//   - "claim": the handler did not run (unless [WithFailOpen] let it run unguarded).
//   - "complete": the handler ran, but its outcome was not recorded. Do already resent the
//     completion while ctx's deadline allowed, then read the record back.
//   - [OpCommit]: the handler's attached writes may or may not have committed.
//
// With "complete" and [idemstore.ErrNotCommitted], nothing of the outcome committed: not
// the record, nor the writes attached with [Attach]. The key was released, so a retry runs
// the handler again. Its effects outside the attached writes did happen. Without
// ErrNotCommitted, the key stays in progress until its lease ends. A retry after that
// runs the handler again.
//
// An attached write the store refused ([ErrConditionFailed]: its condition failed, a
// constraint was violated) committed nothing either, and the key was released. The
// store's typed error (pgstore's or dynamo's AttachedWriteError, an
// [idemstore.Refusal]) and the driver's error stay reachable with errors.As from Do's
// error and from the hooks' events, and the guard logs the refusal once at WARN with its
// reason, never a value. [IsRefused] tells a refusal for good from one that may not
// recur; for one for good, a handler may choose the result its key completes with
// instead ([OnRefused]), so that a retry replays it rather than meet the same refusal.
//
// [ErrPayloadMismatch] also answers a request whose key is held by another request's
// lease-ended record with a checkpoint. The checkpoint records that request's effects, so
// the key stays with it until it completes or expires.
//
// Store authors: see package idemstore for the Store interface and its behaviour suite.
//
// When Lambda retries: https://docs.aws.amazon.com/lambda/latest/dg/invocation-retries.html
//
// The conditional writes the DynamoDB store relies on:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
package idem
