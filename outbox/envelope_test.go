package outbox_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/outbox"
)

// TestEnvelope: a JSON payload travels as JSON, any other as base64, an empty one not at
// all; the id is under EnvelopeKey, and decoding gives the payload back.
func TestEnvelope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"json", []byte(`{"order": "ord-1"}`), `{"idempotencyKey":"id-1","type":"Paid","orderingKey":"k","headers":{"a":"1","b":"2"},"payload":{"order":"ord-1"}}`},
		{"bytes", []byte{0xff, 0x00, 'x'}, `{"idempotencyKey":"id-1","type":"Paid","orderingKey":"k","headers":{"a":"1","b":"2"},"payloadBase64":"/wB4"}`},
		{"empty", nil, `{"idempotencyKey":"id-1","type":"Paid","orderingKey":"k","headers":{"a":"1","b":"2"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := outbox.Message{ID: "id-1", OutboxEvent: outbox.Event{Destination: "d", OrderingKey: "k", Type: "Paid",
				Payload: tc.payload, Headers: map[string]string{"b": "2", "a": "1"}}}
			b := outbox.NewEnvelope(m).Bytes()
			assert.JSONEq(t, tc.want, string(b))
			assert.Equal(t, b, outbox.NewEnvelope(m).Bytes(), "the same bytes on every publish")

			var got map[string]any
			require.NoError(t, json.Unmarshal(b, &got))
			assert.Equal(t, "id-1", got[outbox.EnvelopeKey])
			var e outbox.Envelope
			require.NoError(t, json.Unmarshal(b, &e))
			if tc.name == "json" {
				assert.JSONEq(t, string(tc.payload), string(e.Data()))
			} else {
				assert.Equal(t, tc.payload, e.Data())
			}
		})
	}
}
