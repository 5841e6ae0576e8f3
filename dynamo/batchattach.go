package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

const (
	// maxTransactItems is DynamoDB's limit of actions in one TransactWriteItems call.
	maxTransactItems = 100
	// maxTransactBytes bounds the estimated size of one transaction the batch completion
	// packs, below DynamoDB's 4 MB per TransactWriteItems request: the estimate counts
	// items and expressions, not the request's framing.
	maxTransactBytes = 3_500_000
)

// txGroup is one record's share of a batch transaction: its result's item (kept apart) if
// any, its completion, and its attached writes, in that order.
type txGroup struct {
	i          int // the record's index in the call
	rec        *idemstore.Record
	attached   []any
	items      []types.TransactWriteItem
	completion int // the completion's index in items
	size       int
}

// CompleteManyAttached implements [idemstore.BatchAttachStore]: it completes each record
// with its attached writes as [Store.Complete] would. It packs the records' items into as
// few TransactWriteItems calls as DynamoDB's limits allow (100 actions, 4 MB): a batch of
// 10 completions with one attached write each is one call instead of ten. A record's group
// in a transaction holds, in this order:
//
//   - its result's item, when the result is kept apart, so that the completion naming it
//     never commits without it;
//   - its completion, conditional on its lease token and on the record being in progress;
//   - its attached writes.
//
// Two records whose actions touch one item (attached writes crediting one account) go in
// different transactions, which DynamoDB requires.
//
// A cancelled transaction names the failing actions in its CancellationReasons. Each
// record whose own action failed gets its verdict, as Complete would report it:
//
//   - its completion's condition failed: [idem.ErrLeaseLost], or nil when the record is
//     completed under its token already (a resend of a transaction that landed);
//   - an attached write's condition failed: an [*AttachedWriteError] wrapping
//     [idem.ErrConditionFailed];
//   - an item is over the size limit.
//
// The transaction is then sent once more without those records. If it is cancelled again,
// or was cancelled for no record's own action (a conflicting transaction, throttling), the
// records left are completed one by one with Complete. A call whose outcome is unknown (a
// network error, a timeout) fails each of its records with an error wrapping
// [idem.ErrStore]. The guard then sends each alone again with Complete, which commits
// nothing twice, and reads it back if that fails too.
//
// A record with more attached writes than fit one transaction with it and its result is
// completed alone with Complete. The function's role needs dynamodb:PutItem,
// dynamodb:UpdateItem and the attached writes' actions, as for Complete.
func (s *Store) CompleteManyAttached(ctx context.Context, recs []*idemstore.Record, attached [][]any) []error {
	out := make([]error, len(recs))
	var groups []txGroup
	for i, rec := range recs {
		var a []any
		if i < len(attached) {
			a = attached[i]
		}
		g, err := s.group(i, rec, a)
		switch {
		case err != nil:
			out[i] = err
		case len(g.items) > maxTransactItems:
			out[i] = s.Complete(ctx, rec, a)
		default:
			groups = append(groups, g)
		}
	}
	for _, tx := range pack(groups) {
		s.commitGroups(ctx, tx.groups, out)
	}
	return out
}

// transaction is a set of groups packed for one TransactWriteItems call.
type transaction struct {
	groups []txGroup
	n      int             // actions
	size   int             // estimated bytes
	items  map[string]bool // the items its actions touch (see itemIdentity)
}

// pack puts groups, in order, into as few transactions as the limits allow: each group in
// the first transaction with room for it (100 actions, maxTransactBytes) and no action on
// an item that one of its actions touches, since DynamoDB refuses a transaction with two
// actions on one item (two messages crediting one account, say).
func pack(groups []txGroup) []*transaction {
	var txs []*transaction
	for _, g := range groups {
		ids := make([]string, 0, len(g.items))
		for _, w := range g.items {
			ids = append(ids, itemIdentity(w))
		}
		var into *transaction
	find:
		for _, tx := range txs {
			if tx.n+len(g.items) > maxTransactItems || tx.size+g.size > maxTransactBytes {
				continue
			}
			for _, id := range ids {
				if tx.items[id] {
					continue find
				}
			}
			into = tx
			break
		}
		if into == nil {
			into = &transaction{items: map[string]bool{}}
			txs = append(txs, into)
		}
		into.groups = append(into.groups, g)
		into.n += len(g.items)
		into.size += g.size
		for _, id := range ids {
			into.items[id] = true
		}
	}
	return txs
}

// itemIdentity names the item an action touches: its table and key. A Put names its whole
// item, its key schema being unknown here: two Puts of one key with different values are
// not told apart, and DynamoDB refuses their transaction (then each record completes
// alone; see [Store.commitGroups]).
func itemIdentity(w types.TransactWriteItem) string {
	var table *string
	var key map[string]types.AttributeValue
	switch {
	case w.Put != nil:
		table, key = w.Put.TableName, w.Put.Item
	case w.Update != nil:
		table, key = w.Update.TableName, w.Update.Key
	case w.Delete != nil:
		table, key = w.Delete.TableName, w.Delete.Key
	case w.ConditionCheck != nil:
		table, key = w.ConditionCheck.TableName, w.ConditionCheck.Key
	}
	var b strings.Builder
	b.WriteString(aws.ToString(table))
	for _, name := range slices.Sorted(maps.Keys(key)) {
		b.WriteString("\x00" + name + "\x00")
		switch v := key[name].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString("B" + string(v.Value))
		default:
			fmt.Fprintf(&b, "%T%v", v, v)
		}
	}
	return b.String()
}

// group builds record i's share of a batch transaction.
func (s *Store) group(i int, rec *idemstore.Record, attached []any) (txGroup, error) {
	g := txGroup{i: i, rec: rec, attached: attached}
	ref, result := s.resultApart(rec)
	upd, err := s.completion(rec, ref)
	if err != nil {
		return g, err
	}
	upd.ConditionExpression = aws.String(ownedInProgressCondition)
	upd.ExpressionAttributeValues[":inprogress"] = &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)}
	upd.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	items, err := transactItems(upd, attached)
	if err != nil {
		return g, err
	}
	if result != nil {
		items = append([]types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(s.table), Item: result}}}, items...)
		g.completion = 1
	}
	g.items = items
	for _, w := range items {
		g.size += actionSize(w)
	}
	return g, nil
}

// actionSize estimates the bytes one transaction action adds to a request: its item or
// key and its expressions' values, names and text.
func actionSize(w types.TransactWriteItem) int {
	n := 0
	add := func(item, values map[string]types.AttributeValue, names map[string]string, exprs ...*string) {
		n += itemSize(item) + itemSize(values)
		for k, v := range names {
			n += len(k) + len(v)
		}
		for _, e := range exprs {
			n += len(aws.ToString(e))
		}
	}
	switch {
	case w.Put != nil:
		add(w.Put.Item, w.Put.ExpressionAttributeValues, w.Put.ExpressionAttributeNames, w.Put.ConditionExpression)
	case w.Update != nil:
		add(w.Update.Key, w.Update.ExpressionAttributeValues, w.Update.ExpressionAttributeNames, w.Update.UpdateExpression, w.Update.ConditionExpression)
	case w.Delete != nil:
		add(w.Delete.Key, w.Delete.ExpressionAttributeValues, w.Delete.ExpressionAttributeNames, w.Delete.ConditionExpression)
	case w.ConditionCheck != nil:
		add(w.ConditionCheck.Key, w.ConditionCheck.ExpressionAttributeValues, w.ConditionCheck.ExpressionAttributeNames, w.ConditionCheck.ConditionExpression)
	}
	return n
}

// commitGroups commits groups in one transaction, and puts each record's answer in out:
// see [Store.CompleteManyAttached].
func (s *Store) commitGroups(ctx context.Context, groups []txGroup, out []error) {
	for attempt := 0; len(groups) > 0; attempt++ {
		var items []types.TransactWriteItem
		for _, g := range groups {
			items = append(items, g.items...)
		}
		_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return
		}
		var tce *types.TransactionCanceledException
		cancelled := errors.As(err, &tce)
		if !cancelled && !refused(err) {
			// Unknown outcome: the guard resends and reads back.
			for _, g := range groups {
				out[g.i] = s.fail("complete", err)
			}
			return
		}
		if !cancelled || len(tce.CancellationReasons) != len(items) {
			// Refused as a whole without saying which action (two Puts of one key, an item
			// over the size limit): nothing committed, and Complete tells, record by record.
			s.completeEach(ctx, groups, out)
			return
		}
		// Cancelled: nothing committed. A record whose own action failed gets its verdict.
		var rest []txGroup
		at := 0
		for _, g := range groups {
			reasons := tce.CancellationReasons[at : at+len(g.items)]
			at += len(g.items)
			if verdict, ok := s.verdict(g, reasons, err); ok {
				out[g.i] = verdict
				continue
			}
			rest = append(rest, g)
		}
		if len(rest) == len(groups) || attempt > 0 {
			s.completeEach(ctx, rest, out)
			return
		}
		groups = rest
	}
}

// refused reports whether err is DynamoDB's refusal of a whole request as invalid (a
// ValidationException: an item over the size limit, two actions on one item), which
// commits nothing.
func refused(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException"
}

// completeEach completes each group's record alone, with [Store.Complete].
func (s *Store) completeEach(ctx context.Context, groups []txGroup, out []error) {
	for _, g := range groups {
		out[g.i] = s.Complete(ctx, g.rec, g.attached)
	}
}

// verdict maps the cancellation reasons of g's actions to its record's answer, as
// [Store.transactFail] does for a transaction of its own. ok is false when none of its
// actions failed: the transaction was cancelled for another record's.
func (s *Store) verdict(g txGroup, reasons []types.CancellationReason, err error) (verdict error, ok bool) {
	for k, r := range reasons {
		c := code(r.Code)
		tooLarge := c == "ValidationError" && mentionsItemSize(r.Message)
		switch {
		case k < g.completion && tooLarge: // the result's item
			return fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrTooLarge, err), true
		case k == g.completion && c == "ConditionalCheckFailed":
			if s.completedBy(r.Item, g.rec) {
				// A resend of a transaction that committed: nothing committed twice.
				return nil, true
			}
			return fmt.Errorf("dynamo: complete: %w: %w", idem.ErrLeaseLost, err), true
		case k == g.completion && tooLarge:
			return fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrTooLarge, err), true
		case k > g.completion && c == "ConditionalCheckFailed":
			return &AttachedWriteError{Index: k - g.completion - 1, Table: tableOf(g.items, k), Code: codeConditionFailed, Err: fmt.Errorf("%w: %w", idem.ErrConditionFailed, err)}, true
		case k > g.completion && tooLarge:
			return attachedTooLarge(k-g.completion-1, tableOf(g.items, k), err), true
		}
	}
	return nil, false
}

var _ idemstore.BatchAttachStore = (*Store)(nil)
