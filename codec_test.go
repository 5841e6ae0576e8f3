package idem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// A stored result replayed into a type it does not fit is an error, never a zero value
// with replayed true.
func TestReplayIntoAnotherTypeIsAnError(t *testing.T) {
	t.Parallel()
	type order struct {
		OrderID string `json:"order_id"`
	}
	type balance struct {
		Balance int `json:"balance"`
	}
	ctx := context.Background()
	g, err := idem.New(memstore.New(), "test", idem.WithScope("codec"))
	require.NoError(t, err)
	req := idem.Request{Key: "k"}
	_, _, err = idem.Do(ctx, g, req, func(context.Context) (order, error) { return order{OrderID: "o-1"}, nil })
	require.NoError(t, err)

	ran := false
	got, replayed, err := idem.Do(ctx, g, req, func(context.Context) (balance, error) { ran = true; return balance{}, nil })
	require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
	assert.False(t, replayed)
	assert.False(t, ran, "a replay never runs the handler")
	assert.Zero(t, got)

	// The type it was stored as still replays, and so does a type with more fields.
	type orderV2 struct {
		OrderID string `json:"order_id"`
		Note    string `json:"note"`
	}
	o, replayed, err := idem.Do(ctx, g, req, func(context.Context) (orderV2, error) { return orderV2{}, nil })
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, "o-1", o.OrderID)
}

func TestJSONCodecIsStrict(t *testing.T) {
	t.Parallel()
	var c idem.JSONCodec
	for _, tc := range []struct {
		name, data string
		ok         bool
	}{
		{"fits", `{"a":1}`, true},
		{"unknown member", `{"a":1,"b":2}`, false},
		{"nested unknown member", `{"a":1,"n":{"x":1,"y":2}}`, false},
		{"trailing value", `{"a":1} {"a":2}`, false},
		{"another kind", `[1]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v struct {
				A int `json:"a"`
				N *struct {
					X int `json:"x"`
				} `json:"n"`
			}
			err := c.Unmarshal([]byte(tc.data), &v)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
