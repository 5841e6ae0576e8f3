package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
)

// Limits of a credit.
const (
	maxAccountIDLength = 128
	maxAmount          = 100_000_000 // cents
)

// errInvalidCredit marks a message body that is not a valid credit. Such a message fails
// (a batch item failure): SQS delivers it again until its redrive policy moves it to the
// dead-letter queue, where someone can look at it.
var errInvalidCredit = errors.New("invalid credit")

// credit is a message body: an amount to add to an account's balance.
type credit struct {
	AccountID   string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
}

// ledger credits accounts in the ledger table, keyed by account_id, with the balance in
// balance_cents.
type ledger struct {
	table string
	now   func() time.Time
}

// credit adds the message's amount to its account's balance with an ADD, which is not
// idempotent by itself: a second delivery would add it twice. The update is attached to
// the completion of the message's idempotency record, so both commit in one transaction
// or neither does, and a redelivery after the commit is replayed, not run.
func (l *ledger) credit(ctx context.Context, m events.SQSMessage) error {
	c, err := parseCredit(m.Body)
	if err != nil {
		return err
	}
	return dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(l.table),
		Key: map[string]types.AttributeValue{
			"account_id": &types.AttributeValueMemberS{Value: c.AccountID},
		},
		UpdateExpression: aws.String("ADD #balance :amount SET #updated = :now"),
		ExpressionAttributeNames: map[string]string{
			"#balance": "balance_cents",
			"#updated": "updated_at",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":amount": &types.AttributeValueMemberN{Value: strconv.FormatInt(c.AmountCents, 10)},
			":now":    &types.AttributeValueMemberS{Value: l.now().UTC().Format(time.RFC3339Nano)},
		},
	}})
}

// parseCredit decodes and validates a message body.
func parseCredit(body string) (credit, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var c credit
	if err := dec.Decode(&c); err != nil {
		return credit{}, fmt.Errorf("%w: %w", errInvalidCredit, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return credit{}, fmt.Errorf("%w: data after the JSON object", errInvalidCredit)
	}
	switch {
	case c.AccountID == "":
		return credit{}, fmt.Errorf("%w: account_id: required", errInvalidCredit)
	case len(c.AccountID) > maxAccountIDLength:
		return credit{}, fmt.Errorf("%w: account_id: at most %d bytes", errInvalidCredit, maxAccountIDLength)
	case c.AmountCents < 1 || c.AmountCents > maxAmount:
		return credit{}, fmt.Errorf("%w: amount_cents: must be between 1 and %d", errInvalidCredit, maxAmount)
	}
	return c, nil
}
