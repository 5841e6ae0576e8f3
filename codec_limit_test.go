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
