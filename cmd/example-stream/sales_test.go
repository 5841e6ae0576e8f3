package main

import (
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSale(t *testing.T) {
	t.Parallel()
	s := events.NewStringAttribute
	n := events.NewNumberAttribute
	tests := []struct {
		name  string
		image map[string]events.DynamoDBAttributeValue
		want  sale
		ok    bool
	}{
		{"valid", map[string]events.DynamoDBAttributeValue{"sku": s("sku-1"), "amount_cents": n("500")}, sale{"sku-1", 500}, true},
		{"no image", nil, sale{}, false},
		{"no sku", map[string]events.DynamoDBAttributeValue{"amount_cents": n("500")}, sale{}, false},
		{"empty sku", map[string]events.DynamoDBAttributeValue{"sku": s(""), "amount_cents": n("500")}, sale{}, false},
		{"numeric sku", map[string]events.DynamoDBAttributeValue{"sku": n("1"), "amount_cents": n("500")}, sale{}, false},
		{"long sku", map[string]events.DynamoDBAttributeValue{"sku": s(string(make([]byte, maxSKULength+1))), "amount_cents": n("1")}, sale{}, false},
		{"no amount", map[string]events.DynamoDBAttributeValue{"sku": s("sku-1")}, sale{}, false},
		{"string amount", map[string]events.DynamoDBAttributeValue{"sku": s("sku-1"), "amount_cents": s("500")}, sale{}, false},
		{"fractional amount", map[string]events.DynamoDBAttributeValue{"sku": s("sku-1"), "amount_cents": n("5.5")}, sale{}, false},
		{"zero amount", map[string]events.DynamoDBAttributeValue{"sku": s("sku-1"), "amount_cents": n("0")}, sale{}, false},
		{"too large", map[string]events.DynamoDBAttributeValue{"sku": s("sku-1"), "amount_cents": n("100000001")}, sale{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseSale(tc.image)
			if !tc.ok {
				require.ErrorIs(t, err, errInvalidOrder)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A record's key outlives the stream's retention (24 hours), so every delivery of the
// record finds it and replays.
func TestRecordExpiryOutlivesTheStream(t *testing.T) {
	t.Parallel()
	assert.Greater(t, recordExpiry, 24*time.Hour)
}
