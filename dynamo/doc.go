// Package dynamo is the Amazon DynamoDB [idemstore.Store]: it keeps one item per idempotency
// key (and one more for a result over 1 KB) and makes every state change a conditional
// write, so any number of Lambda instances can share one table and a key's handler still
// runs at most once.
//
// # Mental model
//
// A record moves from absent to INPROGRESS (claimed under a lease) to COMPLETED (the stored
// result) and, after its expiry, back to absent. Each move is one conditional request. The
// claim is a PutItem that succeeds only if no live record holds the key; when it fails,
// DynamoDB returns the record that holds it in the same response, so a replay costs one
// round trip. Completion, release, lease extension and checkpoints are conditional on the
// random lease token written by the claim: a worker whose lease ran out and was taken over
// cannot overwrite the new owner's record (fencing), and learns so from
// [idem.ErrLeaseLost]. Expired records count as absent even while they linger in the table,
// because TTL deletion lags expiry by up to days.
//
// A result too large for a record of 1 KB (after compression) is kept in an item of its
// own, which the completed record names: DynamoDB bills the failed claim of a replay by the
// size of the item it meets, so a replay then costs one write unit plus the read of the
// result, not one write unit per KB of it. Such a result costs one call more to store and
// one more to replay; see [Store.Complete].
//
// With [Attach], a handler adds its own writes (an order row, a ledger ADD) to the
// completion, which then is one TransactWriteItems: the business effect and the record
// commit together or not at all.
//
// Batch consumers (the sqs package, through [idem.Guard.Claim]) claim, complete and release
// up to 25 records per round trip with PartiQL statements in BatchExecuteStatement: see
// [Store.ClaimMany]. Their role needs the IAM actions dynamodb:PartiQLInsert,
// dynamodb:PartiQLUpdate and dynamodb:BatchGetItem besides the single-item ones.
//
// Items use the attribute names of the Powertools for AWS Lambda idempotency utilities
// (id, status, expiration, in_progress_expiration, validation, data), so a table can be
// shared with functions in other languages; [WithAttributes] renames them and
// [WithSortKey] fits the records into a single-table design.
//
// # Durability
//
// At most once holds only while every write the store was told succeeded stays: a lost
// claim lets a second caller run the handler beside the first, a lost completion lets a
// retry run it again, a lost checkpoint makes the next owner resume from an earlier one.
// A DynamoDB table in one Region keeps every write it acknowledged (it replicates each
// across Availability Zones), so the store needs nothing more. What loses writes:
//
//   - Global tables in their default mode, multi-Region eventual consistency, written in
//     more than one Region. Replication is asynchronous (usually within a second), a
//     conditional write is judged against the local replica only, and concurrent writes
//     resolve by last writer wins: callers in two Regions can both claim a key and both
//     run the handler, and a key completed in one Region runs again in another that has
//     not received the record yet. The items of one transaction replicate one by one, so
//     another Region may see attached writes without their completed record. Send a key's
//     requests to one Region at a time, and accept that keys written there in the last
//     moments before a failover may run again in the next.
//   - Restoring the table (point-in-time recovery, a backup): records written after the
//     restore point are gone, and their keys run again.
//
// # Usage
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	// ...
//	client := dynamodb.NewFromConfig(cfg)
//	store, err := dynamo.New(client, os.Getenv("IDEMPOTENCY_TABLE"))
//	// ...
//	guard, err := idem.New(store, "create-order")
//	// ...
//	req := idem.Request{Key: "order-7f3a", Fingerprint: []byte(`{"amount_cents":1299}`)}
//	o, replayed, err := idem.Do(ctx, guard, req, func(ctx context.Context) (order, error) {
//		o := order{ID: "o-42", Amount: 1299}
//		return o, dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{
//			TableName: aws.String(os.Getenv("ORDERS_TABLE")),
//			Item: map[string]types.AttributeValue{
//				"id":           &types.AttributeValueMemberS{Value: o.ID},
//				"amount_cents": &types.AttributeValueMemberN{Value: fmt.Sprint(o.Amount)},
//			},
//			ConditionExpression: aws.String("attribute_not_exists(id)"),
//		}})
//	})
//
// The table needs a string partition key "id" and TTL on "expiration"; [CreateTable]
// makes one for tests and local runs.
//
// # AWS documentation
//
//   - Condition expressions and conditional writes:
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
//   - Time to Live (TTL):
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html
//   - TransactWriteItems:
//     https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
//   - Global tables, consistency modes and conflict resolution:
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html
//   - Item size limit:
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
//   - Capacity units consumed by reads and writes:
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
//   - Batch operations with PartiQL (BatchExecuteStatement):
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-reference.multiplestatements.batching.html
package dynamo
