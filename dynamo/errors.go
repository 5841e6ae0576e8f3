package dynamo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
)

// fail turns an SDK error of op into an idem error: [idem.ErrTooLarge] for an item over
// DynamoDB's size limit, else an [*idem.StoreError]. Either way errors.As still reaches the
// SDK error.
func (s *Store) fail(op string, err error) error {
	if isItemTooLarge(err) {
		return fmt.Errorf("dynamo: %s: %w: %w", op, idem.ErrTooLarge, err)
	}
	return &idem.StoreError{Op: op, Err: err}
}

// leaseFail is fail for writes conditional on the lease token: a failed condition means
// another owner holds the key, or nobody does.
func (s *Store) leaseFail(op string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamo: %s: %w: %w", op, idem.ErrLeaseLost, err)
	}
	return s.fail(op, err)
}

// transactFail maps the error of a transactional completion. Cancellation reasons come in
// the order of the request's items, and the completion is item 0.
func (s *Store) transactFail(err error) error {
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return s.fail("complete", err)
	}
	reasons := tce.CancellationReasons
	if len(reasons) > 0 {
		switch code(reasons[0].Code) {
		case "ConditionalCheckFailed":
			return fmt.Errorf("dynamo: complete: %w: %w", idem.ErrLeaseLost, err)
		case "ValidationError":
			if mentionsItemSize(reasons[0].Message) {
				return fmt.Errorf("dynamo: complete: %w: %w", idem.ErrTooLarge, err)
			}
		}
	}
	for i, r := range reasons {
		if i > 0 && code(r.Code) == "ConditionalCheckFailed" {
			return fmt.Errorf("dynamo: complete: attached write %d: %w: %w", i-1, idem.ErrConditionFailed, err)
		}
	}
	// Cancelled for another reason (a conflicting transaction, throttling, an invalid
	// attached item): the transaction committed nothing, so the guard can release the key
	// instead of leaving it in progress until the lease ends.
	return &idem.StoreError{Op: "complete", Err: fmt.Errorf("dynamo: complete: %w: %w", idem.ErrNotCommitted, err)}
}

func code(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// isItemTooLarge reports whether err is DynamoDB's refusal of an item over 400 KB. The
// service has no error code of its own for it, only a ValidationException whose message
// names the item size.
func isItemTooLarge(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
		return false
	}
	msg := apiErr.ErrorMessage()
	return mentionsItemSize(&msg)
}

func mentionsItemSize(msg *string) bool {
	return msg != nil && strings.Contains(strings.ToLower(*msg), "item size")
}
