package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
)

// MaxAttached is the most writes that can be attached to one completion: DynamoDB's limit
// of 100 actions per TransactWriteItems, less the completion itself.
const MaxAttached = 99

// Attach adds DynamoDB writes to the completion of the key whose guarded handler ctx
// belongs to (see [idem.Attach]). They commit in one TransactWriteItems with the completed
// record, which is conditional on the lease token: they all land with it or none does, so
// a crash between doing the work and recording it cannot lead to a second execution, and
// a worker whose lease was taken over never writes. Give every item its TableName; an item
// may carry its own condition, and if that fails the completion fails with
// [idem.ErrConditionFailed] and the key is released.
//
// Attach returns an error outside a guarded handler and when more than [MaxAttached] items
// are given; if several calls together attach more, the completion fails. It is safe for
// concurrent use.
func Attach(ctx context.Context, items ...types.TransactWriteItem) error {
	if len(items) > MaxAttached {
		return fmt.Errorf("dynamo: Attach: %d items, but at most %d fit one transaction with the completion", len(items), MaxAttached)
	}
	writes := make([]any, len(items))
	for i := range items {
		writes[i] = items[i]
	}
	return idem.Attach(ctx, writes...)
}

// transactItems returns the completion followed by the attached writes, which must be
// types.TransactWriteItem values (or pointers to them), as [Attach] adds them.
func transactItems(completion *types.Update, attached []any) ([]types.TransactWriteItem, error) {
	if len(attached) > MaxAttached {
		return nil, fmt.Errorf("dynamo: complete: %d attached writes, but at most %d fit one transaction with the completion", len(attached), MaxAttached)
	}
	items := make([]types.TransactWriteItem, 0, 1+len(attached))
	items = append(items, types.TransactWriteItem{Update: completion})
	for i, a := range attached {
		switch w := a.(type) {
		case types.TransactWriteItem:
			items = append(items, w)
		case *types.TransactWriteItem:
			if w == nil {
				return nil, fmt.Errorf("dynamo: complete: attached write %d is a nil *types.TransactWriteItem", i)
			}
			items = append(items, *w)
		default:
			return nil, fmt.Errorf("dynamo: complete: attached write %d is %T, want types.TransactWriteItem (use dynamo.Attach)", i, a)
		}
	}
	return items, nil
}
