package dynamostream

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// ItemKey returns the ordering group of a record: its item's primary key (the stream
// record's Keys), in a canonical encoding. Records of one item run in sequence order. A
// record without Keys is an error: it fails with batch.ReasonKey.
func ItemKey(r events.DynamoDBEventRecord) (string, error) {
	if len(r.Change.Keys) == 0 {
		return "", fmt.Errorf("dynamostream: record %s has no Keys", r.EventID)
	}
	b, err := json.Marshal(r.Change.Keys) // encoding/json sorts map keys: canonical
	if err != nil {
		return "", fmt.Errorf("dynamostream: Keys: %w", err)
	}
	return string(b), nil
}

// ChangeFingerprint returns what the record changed as its fingerprint: the canonical
// JSON of its event name, Keys, NewImage and OldImage. The stream view type decides which
// images a record carries.
func ChangeFingerprint(r events.DynamoDBEventRecord) ([]byte, error) {
	b, err := json.Marshal(struct {
		EventName string                                   `json:"eventName"`
		Keys      map[string]events.DynamoDBAttributeValue `json:"Keys"`
		NewImage  map[string]events.DynamoDBAttributeValue `json:"NewImage,omitempty"`
		OldImage  map[string]events.DynamoDBAttributeValue `json:"OldImage,omitempty"`
	}{r.EventName, r.Change.Keys, r.Change.NewImage, r.Change.OldImage})
	if err != nil {
		return nil, fmt.Errorf("dynamostream: fingerprint: %w", err)
	}
	return b, nil
}

// Decoded returns the record as [WithKeyJMESPath] sees it: a map with eventID, eventName,
// SequenceNumber, and Keys, NewImage and OldImage as plain JSON values rather than
// DynamoDB's typed ones: a string, a number (exact), a bool, null, a list, an object;
// binary as base64; sets as lists.
func Decoded(r events.DynamoDBEventRecord) map[string]any {
	return map[string]any{
		"eventID":        r.EventID,
		"eventName":      r.EventName,
		"SequenceNumber": r.Change.SequenceNumber,
		"Keys":           plainMap(r.Change.Keys),
		"NewImage":       plainMap(r.Change.NewImage),
		"OldImage":       plainMap(r.Change.OldImage),
	}
}

func plainMap(m map[string]events.DynamoDBAttributeValue) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = plain(v)
	}
	return out
}

// plain returns v as a plain JSON value.
func plain(v events.DynamoDBAttributeValue) any {
	switch v.DataType() {
	case events.DataTypeString:
		return v.String()
	case events.DataTypeNumber:
		return json.Number(v.Number())
	case events.DataTypeBoolean:
		return v.Boolean()
	case events.DataTypeBinary:
		return base64.StdEncoding.EncodeToString(v.Binary())
	case events.DataTypeList:
		l := v.List()
		out := make([]any, len(l))
		for i, e := range l {
			out[i] = plain(e)
		}
		return out
	case events.DataTypeMap:
		return plainMap(v.Map())
	case events.DataTypeStringSet:
		return anys(v.StringSet(), func(s string) any { return s })
	case events.DataTypeNumberSet:
		return anys(v.NumberSet(), func(s string) any { return json.Number(s) })
	case events.DataTypeBinarySet:
		return anys(v.BinarySet(), func(b []byte) any { return base64.StdEncoding.EncodeToString(b) })
	default: // NULL
		return nil
	}
}

func anys[E any](s []E, f func(E) any) []any {
	out := make([]any, len(s))
	for i, e := range s {
		out[i] = f(e)
	}
	return out
}
