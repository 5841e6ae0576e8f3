package attrcheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// errEmptyName is DynamoDB's refusal of an attribute named "".
var errEmptyName = errors.New("empty attribute name")

// Write returns the error that makes DynamoDB refuse w before running it, for what it
// holds: its item, its key, its expression attribute names and values. That w has one
// action and a table, and that its expressions parse, is the caller's to check. Attributes
// are visited in name order, so the error names the same one every time.
func Write(w types.TransactWriteItem) error {
	var (
		names  map[string]string
		values map[string]types.AttributeValue
	)
	switch {
	case w.Put != nil:
		if err := Item(w.Put.Item); err != nil {
			return err
		}
		names, values = w.Put.ExpressionAttributeNames, w.Put.ExpressionAttributeValues
	case w.Update != nil:
		if err := key(w.Update.Key); err != nil {
			return err
		}
		names, values = w.Update.ExpressionAttributeNames, w.Update.ExpressionAttributeValues
	case w.Delete != nil:
		if err := key(w.Delete.Key); err != nil {
			return err
		}
		names, values = w.Delete.ExpressionAttributeNames, w.Delete.ExpressionAttributeValues
	case w.ConditionCheck != nil:
		if err := key(w.ConditionCheck.Key); err != nil {
			return err
		}
		names, values = w.ConditionCheck.ExpressionAttributeNames, w.ConditionCheck.ExpressionAttributeValues
	}
	if names != nil && len(names) == 0 {
		return errors.New("ExpressionAttributeNames must not be empty")
	}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		if names[k] == "" {
			return fmt.Errorf("ExpressionAttributeNames contains invalid value for key %s: %w", k, errEmptyName)
		}
	}
	if values != nil && len(values) == 0 {
		return errors.New("ExpressionAttributeValues must not be empty")
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if err := Value(values[k]); err != nil {
			return fmt.Errorf("ExpressionAttributeValues contains invalid value for key %s: %w", k, err)
		}
	}
	return nil
}

// Item returns the error that makes DynamoDB refuse item, a whole item or a map's value:
// an attribute named "", or a value [Value] refuses.
func Item(item map[string]types.AttributeValue) error {
	for _, name := range slices.Sorted(maps.Keys(item)) {
		if name == "" {
			return errEmptyName
		}
		if err := Value(item[name]); err != nil {
			return fmt.Errorf("attribute %s: %w", name, err)
		}
	}
	return nil
}

// key is Item for a key, whose values must be [KeyValue]s too.
func key(k map[string]types.AttributeValue) error {
	if err := Item(k); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(k)) {
		if err := KeyValue(name, k[name]); err != nil {
			return err
		}
	}
	return nil
}

// KeyValue returns the error that makes DynamoDB refuse v as the value of the key
// attribute name: an empty string or binary value.
func KeyValue(name string, v types.AttributeValue) error {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if v.Value == "" {
			return fmt.Errorf("the AttributeValue for a key attribute cannot contain an empty string value; key: %s", name)
		}
	case *types.AttributeValueMemberB:
		if len(v.Value) == 0 {
			return fmt.Errorf("the AttributeValue for a key attribute cannot contain an empty binary value; key: %s", name)
		}
	}
	return nil
}

// Value returns the error that makes DynamoDB refuse v, and the values in it: a number
// [ParseNumber] refuses, an empty set, a set with a member twice (numbers compared as
// numbers), a binary value that is nil (the SDK sends none), a NULL that is not true, an
// attribute named "" in a map.
func Value(v types.AttributeValue) error {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		_, err := ParseNumber(v.Value)
		return err
	case *types.AttributeValueMemberB:
		if v.Value == nil {
			return errors.New("supplied AttributeValue is empty, must contain exactly one of the supported datatypes (a nil binary value)")
		}
	case *types.AttributeValueMemberNULL:
		if !v.Value {
			return errors.New("null attribute value types must have the value of true")
		}
	case *types.AttributeValueMemberSS:
		return set("string", v.Value, func(s string) (string, error) { return s, nil })
	case *types.AttributeValueMemberBS:
		return set("binary", v.Value, func(b []byte) (string, error) { return string(b), nil })
	case *types.AttributeValueMemberNS:
		return set("number", v.Value, func(s string) (string, error) {
			n, err := ParseNumber(s)
			if err != nil {
				return "", err
			}
			return n.RatString(), nil
		})
	case *types.AttributeValueMemberL:
		for i, e := range v.Value {
			if err := Value(e); err != nil {
				return fmt.Errorf("list element %d: %w", i, err)
			}
		}
	case *types.AttributeValueMemberM:
		return Item(v.Value)
	}
	return nil
}

// set refuses an empty set, and one whose members, as id identifies them, are not unique.
func set[T any](kind string, members []T, id func(T) (string, error)) error {
	if len(members) == 0 {
		return fmt.Errorf("a %s set may not be empty", kind)
	}
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		k, err := id(m)
		if err != nil {
			return err
		}
		if seen[k] {
			return fmt.Errorf("input collection of type %s set contains duplicates", kind)
		}
		seen[k] = true
	}
	return nil
}
