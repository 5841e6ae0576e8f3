package ddbrelay

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/outbox"
)

// message decodes the outbox item a stream record's NEW_IMAGE holds (see
// dynamo.OutboxRunItem).
func message(r events.DynamoDBEventRecord) (outbox.Message, error) {
	m, _, err := decode(r)
	return m, err
}

// runOf returns the run of the event a stream record holds ("" for an item written without
// one) and its position among the run's events; "" and 0 for a record that does not decode.
func runOf(r events.DynamoDBEventRecord) (run string, position int) {
	_, item, err := decode(r)
	if err != nil {
		return "", 0
	}
	return dynamo.OutboxRun(item), dynamo.OutboxPosition(item)
}

// decode decodes a stream record's NEW_IMAGE, and returns the item too.
func decode(r events.DynamoDBEventRecord) (outbox.Message, map[string]types.AttributeValue, error) {
	if len(r.Change.NewImage) == 0 {
		return outbox.Message{}, nil, fmt.Errorf("ddbrelay: record %s has no NewImage: the stream's view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES", r.Change.SequenceNumber)
	}
	it, err := item(r.Change.NewImage)
	if err != nil {
		return outbox.Message{}, nil, fmt.Errorf("ddbrelay: record %s: %w", r.Change.SequenceNumber, err)
	}
	m, err := dynamo.OutboxMessage(it)
	if err != nil {
		return outbox.Message{}, nil, fmt.Errorf("ddbrelay: record %s: %w", r.Change.SequenceNumber, err)
	}
	return m, it, nil
}

// item converts a stream image to the SDK's attribute values.
func item(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		a, err := attribute(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = a
	}
	return out, nil
}

// attribute converts one attribute value.
func attribute(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeMap:
		m, err := item(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, e := range v.List() {
			a, err := attribute(e)
			if err != nil {
				return nil, err
			}
			l = append(l, a)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	}
	return nil, fmt.Errorf("unknown data type %d", v.DataType())
}
