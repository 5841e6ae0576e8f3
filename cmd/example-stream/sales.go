package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
)

// Limits of an order's image, as example-api writes it.
const (
	maxSKULength = 64
	maxAmount    = 100_000_000 // cents
)

// salesAccountPrefix starts the ledger account of a SKU's sales.
const salesAccountPrefix = "sales#"

// errInvalidOrder marks a new image that is not a valid order. Its record fails: Lambda
// retries from it and, after the mapping's retries, sends it to the on-failure destination.
var errInvalidOrder = errors.New("invalid order")

// sale is what a new order adds to its SKU's sales.
type sale struct {
	SKU         string
	AmountCents int64
}

// sales adds each new order's amount to its SKU's sales in the ledger table, keyed by
// account_id, with the total in balance_cents.
type sales struct {
	table string
	now   func() time.Time
}

// count adds a new order's amount to its SKU's sales with an ADD, which is not idempotent
// by itself: a record delivered again would be counted twice. The update is attached to
// the completion of the record's idempotency record, so both commit in one transaction or
// neither does, and a delivery after the commit is replayed, not run. A change other than
// an INSERT counts nothing.
func (s *sales) count(ctx context.Context, r events.DynamoDBEventRecord) error {
	if r.EventName != string(events.DynamoDBOperationTypeInsert) {
		return nil
	}
	sl, err := parseSale(r.Change.NewImage)
	if err != nil {
		return err
	}
	return dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table),
		Key: map[string]types.AttributeValue{
			"account_id": &types.AttributeValueMemberS{Value: salesAccountPrefix + sl.SKU},
		},
		UpdateExpression: aws.String("ADD #balance :amount SET #updated = :now"),
		ExpressionAttributeNames: map[string]string{
			"#balance": "balance_cents",
			"#updated": "updated_at",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":amount": &types.AttributeValueMemberN{Value: strconv.FormatInt(sl.AmountCents, 10)},
			":now":    &types.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339Nano)},
		},
	}})
}

// parseSale reads and validates an order's new image; the stream must carry new images
// (StreamViewType NEW_IMAGE or NEW_AND_OLD_IMAGES).
func parseSale(image map[string]events.DynamoDBAttributeValue) (sale, error) {
	if image == nil {
		return sale{}, fmt.Errorf("%w: no new image: the stream must carry new images", errInvalidOrder)
	}
	sku, ok := image["sku"]
	if !ok || sku.DataType() != events.DataTypeString || sku.String() == "" {
		return sale{}, fmt.Errorf("%w: sku: a non-empty string is required", errInvalidOrder)
	}
	if len(sku.String()) > maxSKULength {
		return sale{}, fmt.Errorf("%w: sku: at most %d bytes", errInvalidOrder, maxSKULength)
	}
	amount, ok := image["amount_cents"]
	if !ok || amount.DataType() != events.DataTypeNumber {
		return sale{}, fmt.Errorf("%w: amount_cents: a number is required", errInvalidOrder)
	}
	cents, err := strconv.ParseInt(amount.Number(), 10, 64)
	if err != nil || cents < 1 || cents > maxAmount {
		return sale{}, fmt.Errorf("%w: amount_cents: must be an integer between 1 and %d", errInvalidOrder, maxAmount)
	}
	return sale{SKU: sku.String(), AmountCents: cents}, nil
}
