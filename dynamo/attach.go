package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo/internal/attrcheck"
	"github.com/idemkit/idem/idemstore"
)

// MaxAttached is the most writes that can be attached to one completion: DynamoDB's limit
// of 100 actions per TransactWriteItems, less the completion itself.
const MaxAttached = 99

// Attach adds DynamoDB writes to the completion of the key whose guarded handler ctx
// belongs to (see [idem.Attach]). They commit in one TransactWriteItems with the completed
// record, which is conditional on the lease token: they all land with it or none does. So
// a crash between doing the work and recording it cannot lead to a second execution, and
// a worker whose lease was taken over never writes. Give every item its TableName. An item
// may carry its own condition; if that fails, the completion fails with
// [idem.ErrConditionFailed] and the key is released. It is safe for concurrent use.
//
// Attach returns an error outside a guarded handler. It returns an error wrapping
// [idemstore.ErrInvalidAttach] for items the completion could not commit (see
// [Store.CheckAttached]), and attaches nothing of that call:
//
//   - more than [MaxAttached] in all, over every call;
//   - an item without exactly one action or without its table;
//   - an item holding a value DynamoDB refuses: a number it cannot parse or store, an
//     empty set, an empty key value, and so on;
//   - an outbox event whose item is over DynamoDB's 400 KB item limit, or writes whose
//     estimated size, with the completion's, is over its 4 MB transaction limit.
func Attach(ctx context.Context, items ...types.TransactWriteItem) error {
	writes := make([]any, len(items))
	for i := range items {
		writes[i] = items[i]
	}
	return idem.Attach(ctx, writes...)
}

// CheckAttached implements [idemstore.AttachChecker], so that idem.Attach (and [Attach])
// refuse at once what a completion could not commit. Every attached write must be a
// types.TransactWriteItem or a non-nil pointer to one, with exactly one action (Put,
// Update, Delete or ConditionCheck) naming its table. There may be at most [MaxAttached]
// of them in all. The values and names a write holds (its item, its key, its expression
// attribute names and values, and what they contain) must be ones DynamoDB takes. So
// there must be:
//
//   - no number DynamoDB cannot parse (0x10, 1/3, " 1");
//   - no number it cannot store: more than 38 significant digits, a magnitude above
//     9.9999999999999999999999999999999999999E+125 or, unless zero, below 1E-130;
//   - no empty set, and no set with a member twice;
//   - no attribute named "", and no empty string or binary value in a Key;
//   - no NULL that is not true, and no nil binary value;
//   - no empty ExpressionAttributeNames or ExpressionAttributeValues map.
//
// The transaction must fit DynamoDB's size limits, as far as they are known before the
// handler returns:
//
//   - an outbox event's item (outbox.Record) at most 400 KB, counted as DynamoDB counts
//     an item;
//   - the attached writes' estimated size (each Put's item, each other action's key, and
//     every action's expression attribute values, names and expressions), plus
//     2 KB for the completion, at most DynamoDB's 4 MB per transaction.
//     The handler's result is not known yet, so not counted: a result that brings the
//     transaction over the limit makes the completion fail with
//     [idemstore.ErrNotCommitted] (the key is released), as an item over 400 KB does.
//
// The store does not know the tables' key schemas. So only DynamoDB refuses, when the
// completion is sent, an empty string or binary key attribute in a Put's Item, and whatever
// else needs the table (its key types, its indexes) or the expressions parsed. The
// completion then fails with [idemstore.ErrNotCommitted], and the key is released.
func (s *Store) CheckAttached(attached []any) error {
	withOutbox, err := s.withOutbox(attached)
	if err != nil {
		return fmt.Errorf("dynamo: %w", err)
	}
	items, err := attrcheck.AppendAttached(nil, withOutbox, MaxAttached)
	if err != nil {
		return fmt.Errorf("dynamo: %w", err)
	}
	total := completionAllowance
	for i, w := range items {
		if err := checkItem(w); err != nil {
			return fmt.Errorf("dynamo: attached write %d: %w", i, err)
		}
		if _, ok := attached[i].(idemstore.OutboxMessage); ok {
			if n := itemSize(w.Put.Item); n > maxItemSize {
				return fmt.Errorf("dynamo: attached write %d: outbox event of %d bytes, over DynamoDB's item limit of 400 KB", i, n)
			}
		}
		if total += actionSize(w); total > maxTransactionSize {
			return fmt.Errorf("dynamo: attached write %d: the attached writes come to about %d bytes with the completion, over DynamoDB's transaction limit of 4 MB", i, total)
		}
	}
	return nil
}

// completionAllowance is what [Store.CheckAttached] counts for the completion's own update
// in a transaction's size, its result apart: 2 KB.
const completionAllowance = 2 << 10

// maxTransactionSize is DynamoDB's limit on the size of one TransactWriteItems: 4 MB.
const maxTransactionSize = 4 << 20

// transactItems returns the completion followed by the attached writes, which must be
// types.TransactWriteItem values or non-nil pointers to them, at most [MaxAttached]. The
// items themselves are DynamoDB's to judge when the transaction is sent
// ([Store.CheckAttached] judges them earlier, at Attach).
func (s *Store) transactItems(completion *types.Update, attached []any) ([]types.TransactWriteItem, error) {
	attached, err := s.withOutbox(attached)
	if err != nil {
		return nil, fmt.Errorf("dynamo: %w", err)
	}
	items := make([]types.TransactWriteItem, 1, 1+len(attached))
	items[0] = types.TransactWriteItem{Update: completion}
	items, err = attrcheck.AppendAttached(items, attached, MaxAttached)
	if err != nil {
		return nil, fmt.Errorf("dynamo: %w", err)
	}
	return items, nil
}

// checkItem checks what DynamoDB would refuse the whole transaction for, and the SDK
// before sending it: an item needs exactly one action, and the action its table; and its
// values and names must be ones DynamoDB takes (see package attrcheck).
func checkItem(w types.TransactWriteItem) error {
	if err := attrcheck.Action(w); err != nil {
		return err
	}
	return attrcheck.Write(w)
}
