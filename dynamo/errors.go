package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// fail turns an SDK error of op into an idem error: [idemstore.ErrTooLarge] for an item over
// DynamoDB's size limit, else an [*idem.StoreError]. Either way errors.As still reaches the
// SDK error.
func (s *Store) fail(op string, err error) error {
	if isItemTooLarge(err) {
		return fmt.Errorf("dynamo: %s: %w: %w", op, idemstore.ErrTooLarge, err)
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

// transactFail maps the error of the transaction items, which completes rec (its result
// apart in the item ref, if not empty). Cancellation reasons come in the order of the
// request's items, and the completion is item 0.
func (s *Store) transactFail(rec *idemstore.Record, ref string, items []types.TransactWriteItem, err error) error {
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		switch {
		case isItemTooLarge(err):
			return s.tooLarge(rec, ref, items, err)
		case isTransactionTooLarge(err):
			// Refused before it ran: nothing committed.
			return &idem.StoreError{Op: "complete", Err: &AttachedWriteError{
				Index: -1, Code: "ValidationError",
				Err: fmt.Errorf("%w: transaction over DynamoDB's size limit of 4 MB: %w", idemstore.ErrNotCommitted, err),
			}}
		}
		return s.fail("complete", err)
	}
	reasons := tce.CancellationReasons
	if len(reasons) > 0 {
		switch code(reasons[0].Code) {
		case codeConditionFailed:
			if s.completedBy(reasons[0].Item, rec) {
				return nil // a resend of a transaction that committed: nothing committed twice
			}
			return fmt.Errorf("dynamo: complete: %w: %w", idem.ErrLeaseLost, err)
		case "ValidationError":
			if mentionsItemSize(reasons[0].Message) {
				return fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrTooLarge, err)
			}
		}
	}
	for i, r := range reasons {
		if i == 0 {
			continue
		}
		switch {
		case code(r.Code) == codeConditionFailed:
			return &AttachedWriteError{Index: i - 1, Table: tableOf(items, i), Code: codeConditionFailed, Err: fmt.Errorf("%w: %w", idem.ErrConditionFailed, err)}
		case code(r.Code) == "ValidationError" && mentionsItemSize(r.Message):
			return attachedTooLarge(i-1, tableOf(items, i), err)
		}
	}
	// Cancelled for another reason (a conflicting transaction, throttling, an invalid
	// attached item): the transaction committed nothing, so the guard can release the key
	// instead of leaving it in progress until the lease ends. The first attached write
	// DynamoDB gives a reason for is named, so the guard logs the reason code.
	for i := 1; i < len(reasons); i++ {
		if c := code(reasons[i].Code); c != "" && c != "None" {
			return &idem.StoreError{Op: "complete", Err: &AttachedWriteError{
				Index: i - 1, Table: tableOf(items, i), Code: c,
				Err: fmt.Errorf("%w: %w", idemstore.ErrNotCommitted, err),
			}}
		}
	}
	return &idem.StoreError{Op: "complete", Err: fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrNotCommitted, err)}
}

// codeConditionFailed is the cancellation reason code of a write whose condition failed.
const codeConditionFailed = "ConditionalCheckFailed"

// completedBy reports whether item, returned by the completion's failed condition, is
// rec's key completed under rec's token: the transaction was sent before and committed.
// completedAlready is completedBy for the record a failed condition returned, item; if it
// returned none, it reads the record (strongly consistent) instead.
func (s *Store) completedAlready(ctx context.Context, item map[string]types.AttributeValue, rec *idemstore.Record) bool {
	if len(item) == 0 {
		var err error
		if item, err = s.getItem(ctx, rec.Key); err != nil {
			return false
		}
	}
	return s.completedBy(item, rec)
}

func (s *Store) completedBy(item map[string]types.AttributeValue, rec *idemstore.Record) bool {
	if len(item) == 0 {
		return false
	}
	cur, err := s.decodeRecord(item)
	return err == nil && cur.LeaseToken == rec.LeaseToken && cur.Status != idemstore.StatusInProgress
}

// tooLarge maps DynamoDB's refusal of a transaction for an item over its size limit, which
// comes as a ValidationException for the whole request without saying which item. If the
// completed record itself is over the limit, that is [idemstore.ErrTooLarge] (the guard then
// completes without the result); else an attached write is, and nothing committed: the
// first attached Put over the limit is named, if there is one.
func (s *Store) tooLarge(rec *idemstore.Record, ref string, items []types.TransactWriteItem, err error) error {
	stored := *rec
	if ref != "" {
		stored.Data = []byte(ref) // the record holds the key of its result's item instead
	}
	if itemSize(s.encodeRecord(&stored)) > maxItemSize {
		return fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrTooLarge, err)
	}
	for i := 1; i < len(items); i++ {
		if p := items[i].Put; p != nil && itemSize(p.Item) > maxItemSize {
			return attachedTooLarge(i-1, aws.ToString(p.TableName), err)
		}
	}
	return attachedTooLarge(-1, "", err)
}

func attachedTooLarge(index int, table string, err error) error {
	return &idem.StoreError{Op: "complete", Err: &AttachedWriteError{
		Index: index, Table: table, Code: "ValidationError",
		Err: fmt.Errorf("%w: item over DynamoDB's size limit of 400 KB: %w", idemstore.ErrNotCommitted, err),
	}}
}

// tableOf returns the table item i of a transaction goes to.
func tableOf(items []types.TransactWriteItem, i int) string {
	if i >= len(items) {
		return ""
	}
	w := items[i]
	switch {
	case w.Put != nil:
		return aws.ToString(w.Put.TableName)
	case w.Update != nil:
		return aws.ToString(w.Update.TableName)
	case w.Delete != nil:
		return aws.ToString(w.Delete.TableName)
	case w.ConditionCheck != nil:
		return aws.ToString(w.ConditionCheck.TableName)
	}
	return ""
}

// AttachedWriteError names the write attached to a completion (see [Attach]) that made its
// transaction fail. Nothing committed, the completion included, and the guard released the
// key. Err wraps [idem.ErrConditionFailed] when the write's own condition failed, or
// [idemstore.ErrNotCommitted] when DynamoDB refused it for another reason, such as an item
// over the 400 KB limit, a transaction over 4 MB (Index -1), a conflicting transaction or
// throttling (the error then also comes inside an [*idem.StoreError]); and the SDK error (a
// [*types.TransactionCanceledException] with its CancellationReasons, or the
// ValidationException of an item too large), which errors.As still reaches.
//
// It implements [idemstore.Refusal]: [AttachedWriteError.Permanent] tells a refusal for
// good, which [idem.IsRefused] reports and [idem.OnRefused] may answer, from one that may
// not recur, and [AttachedWriteError.Reason] says what refused, for the guard's log.
type AttachedWriteError struct {
	// Index is the write's position among the attached writes, from 0, or -1 when DynamoDB
	// did not say which write it refused.
	Index int
	// Table is the table the write goes to; "" when Index is -1.
	Table string
	// Code is DynamoDB's cancellation reason code for the write: "ConditionalCheckFailed",
	// "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded",
	// "ValidationError" (also for an item over the limit, which DynamoDB does not name),
	// and so on; "" when unknown.
	Code string
	// Err is the cause.
	Err error
}

// Permanent reports whether the write was refused for good: its own condition failed
// (ConditionalCheckFailed on the attached item, a condition on a business item such as a
// balance too low), so that sent again with the same data it meets the same refusal. A
// conflicting transaction, throttling or an item DynamoDB cannot take is not.
func (e *AttachedWriteError) Permanent() bool {
	return e.Code == codeConditionFailed && !errors.Is(e.Err, idemstore.ErrNotCommitted)
}

// Reason says what refused the write, for an operator's log: DynamoDB's reason code, the
// write's position and its table. It never holds a value of the item or its key.
func (e *AttachedWriteError) Reason() string {
	c := e.Code
	if c == "" {
		c = "unknown reason"
	}
	if e.Index < 0 {
		return c + ", an attached write"
	}
	return fmt.Sprintf("%s, attached write %d (table %s)", c, e.Index, e.Table)
}

// Error describes the failure and names the write.
func (e *AttachedWriteError) Error() string {
	if e.Index < 0 {
		return "dynamo: complete: an attached write: " + e.Err.Error()
	}
	return fmt.Sprintf("dynamo: complete: attached write %d (table %q): %v", e.Index, e.Table, e.Err)
}

// Unwrap returns the cause.
func (e *AttachedWriteError) Unwrap() error { return e.Err }

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

// isTransactionTooLarge reports whether err is DynamoDB's refusal of a TransactWriteItems
// request over 4 MB: a ValidationException "Transaction payload size cannot exceed 4MB".
func isTransactionTooLarge(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException" &&
		strings.Contains(strings.ToLower(apiErr.ErrorMessage()), "transaction payload size")
}

func mentionsItemSize(msg *string) bool {
	return msg != nil && strings.Contains(strings.ToLower(*msg), "item size")
}
