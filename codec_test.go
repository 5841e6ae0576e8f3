package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
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

// zerosCodec encodes an int n as n zero bytes, which gzip shrinks a thousandfold: a cheap
// stand-in for a huge but very compressible result.
type zerosCodec struct{}

func (zerosCodec) Name() string { return "zeros" }

func (zerosCodec) Marshal(v any) ([]byte, error) {
	n, ok := v.(int)
	if !ok {
		return nil, errors.New("zeros: not an int")
	}
	return make([]byte, n), nil
}

func (zerosCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*int)
	if !ok {
		return errors.New("zeros: not an *int")
	}
	*p = len(data)
	return nil
}

// TestResultInflatingPastTheLimit stores results around the size a replay inflates at
// most (64 MiB): one that fits replays, one past it completes the key without its body, as
// a result too large for an item does, rather than being stored compressed where no replay
// could ever read it.
func TestResultInflatingPastTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 20
	tests := []struct {
		name    string
		size    int
		wantErr error
	}{
		{"at the limit", limit, nil},
		{"past the limit", limit + 1, idem.ErrResultNotStored},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			g, err := idem.New(s, "test", idem.WithCodec(zerosCodec{}))
			require.NoError(t, err)
			runs := 0
			fn := func(context.Context) (int, error) { runs++; return tc.size, nil }
			v, replayed, err := idem.Do(context.Background(), g, idem.Request{Key: "k"}, fn)
			require.NoError(t, err, "the first call returns its result")
			require.False(t, replayed)
			require.Equal(t, tc.size, v)

			sk, _ := g.StoredKey(idem.Request{Key: "k"})
			rec, err := s.Get(context.Background(), sk)
			require.NoError(t, err)
			assert.Equal(t, idemstore.StatusCompleted, rec.Status, "the work is recorded as done")

			v, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, fn)
			assert.Equal(t, 1, runs, "never run again")
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.NotErrorIs(t, err, idem.ErrIncompatibleRecord)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.size, v)
		})
	}
}
