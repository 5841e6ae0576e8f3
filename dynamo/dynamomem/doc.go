// Package dynamomem is an in-memory DynamoDB for the unit tests of handlers guarded by
// idem on the DynamoDB store. A handler that attaches DynamoDB writes ([dynamo.Attach])
// runs on it unchanged, without Java or a network.
//
// A [Store] holds two things:
//   - the idempotency records, kept by a [memstore.Store];
//   - in-memory tables that the attached writes apply to, in one transaction with the
//     completion, or not at all, as DynamoDB applies them.
//
// The attached writes are the production values (types.TransactWriteItem), with their
// condition and update expressions evaluated as DynamoDB evaluates them. A test creates the
// tables from the same input that creates them in DynamoDB, runs the handler through a
// guard on the store, and reads the tables back with GetItem:
//
//	store := dynamomem.New()
//	if _, err := store.CreateTable(ctx, paymentsTable()); err != nil {
//		panic(err)
//	}
//	g, err := idem.New(store, "charge")
//	// ...
//	out, err := store.GetItem(ctx, &dynamodb.GetItemInput{
//		TableName: aws.String("payments"),
//		Key: map[string]types.AttributeValue{
//			"pk": &types.AttributeValueMemberS{Value: "payment-o-1"},
//		},
//	})
//
// The same test function can run on DynamoDB Local through package dynamotest, which
// starts it: see the package example.
//
// # What is evaluated in memory
//
// A subset of DynamoDB's expressions, on top-level attributes:
//   - actions: Put, Update, Delete and ConditionCheck;
//   - conditions: = <> < <= > >=, BETWEEN, IN, attribute_exists, attribute_not_exists,
//     begins_with, NOT, AND, OR and parentheses;
//   - updates: SET of a value, of a sum or difference of two, or of if_not_exists;
//     REMOVE; ADD of a number.
//
// The rest (nested paths, size, contains, attribute_type, list_append, sets in ADD and
// DELETE) is refused as "not supported in memory", never evaluated otherwise than
// DynamoDB would: test such writes on DynamoDB Local. Item sizes are not checked, nor
// DynamoDB's limits other than 99 attached writes and those of numbers.
//
// # What is refused, and when
//
// idem.Attach refuses at once, with an error wrapping [idemstore.ErrInvalidAttach], what
// DynamoDB refuses before it runs a transaction:
//   - a value DynamoDB refuses, as [dynamo.Store.CheckAttached] refuses it: a number it
//     cannot parse or store, an empty set, a set with a member twice, an attribute named
//     "", an empty string or binary key value (a Put's too, since the table is known);
//   - a reserved word as a bare attribute name, an undefined or unused placeholder;
//   - a key attribute updated, two writes to one item, a table not created.
//
// At the completion, the guard releases the key when:
//   - a condition fails: the error wraps [idem.ErrConditionFailed] and a
//     [*dynamo.AttachedWriteError] naming the write (and, as from DynamoDB, a
//     types.TransactionCanceledException);
//   - a write fails when it runs (arithmetic on a missing or non-number attribute, a
//     result DynamoDB cannot store): the error wraps [idemstore.ErrNotCommitted].
//
// TestAttachedWritesAsOnDynamoDB runs every case of the subset in memory and on DynamoDB
// Local and compares. TestAttachValidationAsOnDynamoDB sends each refused value to
// DynamoDB Local, which answers a ValidationException.
//
// # Why in-memory tables
//
// An attached write is the store's own (a DynamoDB TransactWriteItem, a SQL statement),
// because its atomicity with the record is the store's. A store-neutral write type would
// be a lowest common denominator (no ledger ADD, no conditional upsert) and a second way to
// write the same effect. So this test double takes the production value. The knowledge
// of DynamoDB stays here, beside the SDK, rather than in package memstore, which imports
// no AWS SDK and whose attached value is a func() error.
//
// See DynamoDB's [condition expressions], [update expressions] and [TransactWriteItems].
//
// [condition expressions]: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
// [update expressions]: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html
// [TransactWriteItems]: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
package dynamomem
