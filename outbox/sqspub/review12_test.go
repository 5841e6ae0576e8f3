package sqspub_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/sqspub"
)

// TestReview12_HeaderCannotReplaceTheEventType: Record refuses a header named
// outbox.IDAttribute, "which the relay sets", but not one named sqspub.TypeAttribute
// ("Event-Type"), which the relay sets too. Schedule: a handler records an event of type
// "OrderPlaced" with a header Event-Type: "legacy" (a header the application carried over
// from its own messages); Record accepts it; the relay sends it through sqspub, where the
// header overwrites the type attribute: the consumer, dispatching on Event-Type, receives
// an OrderPlaced event as "legacy". Either Record refuses the header at the call, or the
// type attribute the consumer reads is the event's type. On main neither holds.
func TestReview12_HeaderCannotReplaceTheEventType(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	g, err := idem.New(store, "r12-type")
	require.NoError(t, err)
	var recErr error
	_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
		_, recErr = outbox.Record(ctx, outbox.Event{Destination: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
			Type: "OrderPlaced", Headers: map[string]string{sqspub.TypeAttribute: "legacy"}})
		return "ok", nil
	})
	require.NoError(t, err)
	if recErr != nil {
		assert.ErrorIs(t, recErr, outbox.ErrInvalidEvent)
		return
	}
	msgs := store.Outbox()
	require.Len(t, msgs, 1)
	e := sqspub.Entry("m0", msgs[0].Destination, msgs[0])
	assert.Equal(t, "OrderPlaced", aws.ToString(e.MessageAttributes[sqspub.TypeAttribute].StringValue),
		"the consumer reads the event's type")
}
