package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

type reservation struct {
	ID    string `json:"id"`
	Seats int    `json:"seats"`
}

// runOnce runs fn as the handler of key on g, and returns the handler's error.
func runOnce(t *testing.T, g *idem.Guard, key string, fn func(ctx context.Context) error) error {
	t.Helper()
	_, _, err := idem.Do(context.Background(), g, idem.Request{Key: key}, func(ctx context.Context) (string, error) {
		return "done", fn(ctx)
	})
	return err
}

// storedCheckpoint returns the checkpoint stored for key.
func storedCheckpoint(t *testing.T, s idemstore.Store, g *idem.Guard, key string) string {
	t.Helper()
	sk, err := g.StoredKey(idem.Request{Key: key})
	require.NoError(t, err)
	rec, err := s.Get(context.Background(), sk)
	require.NoError(t, err)
	require.NotNil(t, rec)
	return rec.Checkpoint
}

// TestCheckpointValueSizeBound: the bound is on the whole stored form, step and encoded
// value together: the longest value accepted stores exactly MaxCheckpointLen bytes, one
// byte more is refused with ErrInvalidCheckpoint, and a refused checkpoint writes nothing.
func TestCheckpointValueSizeBound(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	longest := 0
	err = runOnce(t, g, "k", func(ctx context.Context) error {
		require.NoError(t, idem.CheckpointValue(ctx, "reserved", reservation{ID: "r-1"}))
		for n := idem.MaxCheckpointLen; n > 0; n-- {
			err := idem.CheckpointValue(ctx, "reserved", reservation{ID: strings.Repeat("x", n)})
			if err == nil {
				longest = n
				break
			}
			require.ErrorIs(t, err, idem.ErrInvalidCheckpoint, "n=%d", n)
			assert.NotErrorIs(t, err, idem.ErrStore)
			_, v, _, rerr := idem.LastCheckpointValue[reservation](ctx)
			require.NoError(t, rerr)
			require.Equal(t, "r-1", v.ID, "a refused checkpoint changes nothing")
		}
		return errors.New("release, keeping the checkpoint")
	})
	require.Error(t, err)
	require.NotZero(t, longest)
	assert.Len(t, storedCheckpoint(t, s, g, "k"), idem.MaxCheckpointLen, "the longest value accepted fills the bound exactly")

	err = runOnce(t, g, "k", func(ctx context.Context) error {
		_, v, ok, err := idem.LastCheckpointValue[reservation](ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, strings.Repeat("x", longest), v.ID)
		return nil
	})
	require.NoError(t, err)
}

// TestCheckpointValueRefusals: a step that is no valid checkpoint, or a value the codec
// cannot encode, is refused with ErrInvalidCheckpoint, the codec's error reachable, and
// nothing is written; outside a guarded handler CheckpointValue answers ErrNoLease.
func TestCheckpointValueRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		step  string
		value any
	}{
		{"EmptyStep", "", 1},
		{"StepNotUTF8", "reserved\xff", 1},
		{"StepWithNUL", "reserved\x00", 1},
		{"StepTooLong", strings.Repeat("s", idem.MaxCheckpointLen+1), 1},
		{"ValueNotEncodable", "reserved", make(chan int)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			g, err := idem.New(s, "test")
			require.NoError(t, err)
			err = runOnce(t, g, "k", func(ctx context.Context) error {
				require.NoError(t, idem.Checkpoint(ctx, "before"))
				err := idem.CheckpointValue(ctx, tc.step, tc.value)
				require.ErrorIs(t, err, idem.ErrInvalidCheckpoint)
				assert.Equal(t, "before", idem.LastCheckpoint(ctx), "nothing written")
				return errors.New("release")
			})
			require.Error(t, err)
			assert.Equal(t, "before", storedCheckpoint(t, s, g, "k"))
		})
	}

	t.Run("CodecErrorReachable", func(t *testing.T) {
		t.Parallel()
		g, err := idem.New(memstore.New(), "test")
		require.NoError(t, err)
		require.NoError(t, runOnce(t, g, "k", func(ctx context.Context) error {
			err := idem.CheckpointValue(ctx, "reserved", make(chan int))
			var unsupported *json.UnsupportedTypeError
			assert.ErrorAs(t, err, &unsupported)
			return nil
		}))
	})
	t.Run("OutsideHandler", func(t *testing.T) {
		t.Parallel()
		assert.ErrorIs(t, idem.CheckpointValue(context.Background(), "reserved", 1), idem.ErrNoLease)
		step, v, ok, err := idem.LastCheckpointValue[int](context.Background())
		assert.NoError(t, err)
		assert.False(t, ok)
		assert.Empty(t, step)
		assert.Zero(t, v)
	})
}

// TestLastCheckpointValueOfAStringCheckpoint: a checkpoint recorded with Checkpoint (by
// this version or an earlier one, which knew only strings) reads back through
// LastCheckpointValue as its step, with no value (ok false) and no error; so does a
// checkpoint recorded after a value, which replaces it. No checkpoint is step "".
func TestLastCheckpointValueOfAStringCheckpoint(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	require.NoError(t, runOnce(t, g, "k", func(ctx context.Context) error {
		step, v, ok, err := idem.LastCheckpointValue[reservation](ctx)
		require.NoError(t, err)
		assert.Equal(t, "", step)
		assert.False(t, ok)
		assert.Zero(t, v)

		require.NoError(t, idem.Checkpoint(ctx, "reserved:r-1"))
		step, v, ok, err = idem.LastCheckpointValue[reservation](ctx)
		require.NoError(t, err)
		assert.Equal(t, "reserved:r-1", step, "the string is the step")
		assert.False(t, ok, "no value")
		assert.Zero(t, v)

		require.NoError(t, idem.CheckpointValue(ctx, "reserved", reservation{ID: "r-1", Seats: 2}))
		step, v, ok, err = idem.LastCheckpointValue[reservation](ctx)
		require.NoError(t, err)
		assert.Equal(t, "reserved", step)
		assert.True(t, ok)
		assert.Equal(t, reservation{ID: "r-1", Seats: 2}, v)

		require.NoError(t, idem.Checkpoint(ctx, "charged"))
		step, v, ok, err = idem.LastCheckpointValue[reservation](ctx)
		require.NoError(t, err)
		assert.Equal(t, "charged", step, "a checkpoint replaces the last, value and all")
		assert.False(t, ok)
		assert.Zero(t, v)
		return nil
	}))
}

// TestCheckpointRefusesTheStoredFormOfAValue: a string checkpoint can never be read back
// as a value: Checkpoint refuses any string in the form CheckpointValue stores.
func TestCheckpointRefusesTheStoredFormOfAValue(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g, err := idem.New(s, "test")
	require.NoError(t, err)
	require.Error(t, runOnce(t, g, "k", func(ctx context.Context) error {
		require.NoError(t, idem.CheckpointValue(ctx, "reserved", reservation{ID: "r-1"}))
		return errors.New("release")
	}))
	stored := storedCheckpoint(t, s, g, "k")
	require.NoError(t, runOnce(t, g, "k", func(ctx context.Context) error {
		assert.Equal(t, "reserved", idem.LastCheckpoint(ctx), "LastCheckpoint reads a value checkpoint's step")
		err := idem.Checkpoint(ctx, stored)
		require.ErrorIs(t, err, idem.ErrInvalidCheckpoint)
		assert.Equal(t, "reserved", idem.LastCheckpoint(ctx))
		return nil
	}))
}

// otherJSON is JSON under another codec name: a guard that uses it reads no value another
// codec wrote.
type otherJSON struct{ idem.JSONCodec }

func (otherJSON) Name() string { return "json-v2" }

// TestLastCheckpointValueDecodeErrors: a value that does not decode into the type asked
// for, or that another codec wrote, is an error wrapping ErrIncompatibleRecord (the
// codec's error reachable), never a zero value; the step comes back all the same.
func TestLastCheckpointValueDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		read     func(ctx context.Context) (string, bool, error)
		newCodec idem.Codec
		codecErr any
	}{
		{"WrongType", func(ctx context.Context) (string, bool, error) {
			step, _, ok, err := idem.LastCheckpointValue[int](ctx)
			return step, ok, err
		}, nil, new(*json.UnmarshalTypeError)},
		{"UnknownField", func(ctx context.Context) (string, bool, error) {
			step, v, ok, err := idem.LastCheckpointValue[struct{ ID string }](ctx)
			assert.Zero(t, v)
			return step, ok, err
		}, nil, nil},
		{"OtherCodec", func(ctx context.Context) (string, bool, error) {
			step, _, ok, err := idem.LastCheckpointValue[reservation](ctx)
			return step, ok, err
		}, otherJSON{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			g, err := idem.New(s, "test", idem.WithScope("s"))
			require.NoError(t, err)
			require.Error(t, runOnce(t, g, "k", func(ctx context.Context) error {
				require.NoError(t, idem.CheckpointValue(ctx, "reserved", reservation{ID: "r-1", Seats: 2}))
				return errors.New("release")
			}))
			if tc.newCodec != nil {
				g, err = idem.New(s, "test", idem.WithScope("s"), idem.WithCodec(tc.newCodec))
				require.NoError(t, err)
			}
			require.NoError(t, runOnce(t, g, "k", func(ctx context.Context) error {
				step, ok, err := tc.read(ctx)
				require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
				assert.NotErrorIs(t, err, idem.ErrInvalidCheckpoint)
				assert.Equal(t, "reserved", step, "the step comes back with the error")
				assert.False(t, ok)
				if tc.codecErr != nil {
					assert.ErrorAs(t, err, tc.codecErr)
				}
				return nil
			}))
		})
	}
}
