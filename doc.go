// Package idem makes AWS Lambda handlers idempotent: a guarded handler runs at most once per
// idempotency key within the key's expiry window, and every retry or duplicate delivery gets
// the first run's result back without running the handler again.
//
// # Mental model
//
// Each key has one record in a store (DynamoDB in production, see package dynamo; an
// in-memory one in tests, package memstore; PostgreSQL and Redis in their modules). A call
// claims the key with one conditional write that succeeds only if no live record holds it,
// and so becomes the owner of a lease, marked by a random token. The owner runs the handler
// and then completes the record with the result, or releases it on failure so the next retry
// runs again; both writes are conditional on the token, so an owner whose lease expired and
// was taken over can never overwrite its successor ("fencing"). Every other caller finds the
// live record in the claim's own response: a completed record is replayed, an in-progress one
// is refused with [ErrInProgress] (or waited for, see [WithWait]), and a record written for a
// different request fingerprint is refused with [ErrPayloadMismatch].
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
// [DoClaimed] and record every outcome with [Batch.Settle]: on a store that implements
// a batch store (see package idemstore), a batch of new keys costs two round trips in all.
//
// Handlers can record progress with [Checkpoint] and read it after a takeover with
// [LastCheckpoint] (a failed or panicking handler's release keeps the checkpoint for the
// retry, and a takeover carries it into the new owner's record), and attach their own
// store writes to the completion with [Attach] so the business effect and the record
// commit together or not at all.
//
// Store authors: see package idemstore for the Store interface and its behaviour suite.
//
// See https://docs.aws.amazon.com/lambda/latest/dg/invocation-retries.html for when Lambda
// retries, and https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
// for the conditional writes the DynamoDB store relies on.
package idem
