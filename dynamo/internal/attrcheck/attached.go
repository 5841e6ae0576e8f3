package attrcheck

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AppendAttached appends the writes attached to a completion to dst as DynamoDB items and
// returns the result. Each must be a types.TransactWriteItem or a non-nil pointer to one,
// and there may be at most limit of them (dynamo.MaxAttached). What the items hold is
// [Action]'s and [Write]'s to judge.
func AppendAttached(dst []types.TransactWriteItem, attached []any, limit int) ([]types.TransactWriteItem, error) {
	if len(attached) > limit {
		return nil, fmt.Errorf("%d attached writes, but at most %d fit one transaction with the completion", len(attached), limit)
	}
	for i, a := range attached {
		switch v := a.(type) {
		case types.TransactWriteItem:
			dst = append(dst, v)
		case *types.TransactWriteItem:
			if v == nil {
				return nil, fmt.Errorf("attached write %d is a nil *types.TransactWriteItem", i)
			}
			dst = append(dst, *v)
		default:
			return nil, fmt.Errorf("attached write %d is %T, want types.TransactWriteItem (use dynamo.Attach)", i, a)
		}
	}
	return dst, nil
}

// Action returns the error that makes DynamoDB, or the SDK before sending it, refuse w for
// its shape: w needs exactly one action (Put, Update, Delete or ConditionCheck), and the
// action needs its table.
func Action(w types.TransactWriteItem) error {
	var tables []*string
	if w.Put != nil {
		tables = append(tables, w.Put.TableName)
	}
	if w.Update != nil {
		tables = append(tables, w.Update.TableName)
	}
	if w.Delete != nil {
		tables = append(tables, w.Delete.TableName)
	}
	if w.ConditionCheck != nil {
		tables = append(tables, w.ConditionCheck.TableName)
	}
	switch {
	case len(tables) == 0:
		return errors.New("no action: set one of Put, Update, Delete or ConditionCheck")
	case len(tables) > 1:
		return fmt.Errorf("%d actions: a types.TransactWriteItem holds exactly one of Put, Update, Delete or ConditionCheck", len(tables))
	case aws.ToString(tables[0]) == "":
		return errors.New("no TableName")
	}
	return nil
}

// TypeName returns DynamoDB's name for v's type (S, N, B, BOOL, NULL, SS, NS, BS, L or M),
// for error messages; the Go type for any other value.
func TypeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	}
	return fmt.Sprintf("%T", v)
}
