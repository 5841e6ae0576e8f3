package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// booking is a checkpoint value: what a handler's later steps need from its earlier ones.
// Code holds bytes that are neither UTF-8 nor free of NUL, and Note a NUL, which no store
// keeps in a checkpoint as they are: the encoded form must.
type booking struct {
	ReservationID string `json:"reservation_id"`
	ChargeID      string `json:"charge_id,omitempty"`
	Code          []byte `json:"code"`
	Note          string `json:"note"`
}

var reserved = booking{ReservationID: "r-1", Code: []byte{0, 0xff, 0xfe, 'a', 0}, Note: "seat 12\x00B ✓"}

// checkpointValueTakeovers has an owner record a step with a value and die, a second owner
// resume from exactly that value, record the next step with a larger value and die, and a
// third owner resume from exactly that one: each next owner gets the value the last wrote.
func (h Harness) checkpointValueTakeovers(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	k := key(t)
	r1, d1 := blockOwner(h, t, context.Background(), f.guard, k, result{}, func(ctx context.Context) error {
		return idem.CheckpointValue(ctx, "reserved", reserved)
	})
	f.clock.Advance(2 * time.Minute)

	charged := reserved
	charged.ChargeID = "ch-9"
	r2, d2 := blockOwner(h, t, context.Background(), f.guard, k, result{}, func(ctx context.Context) error {
		step, v, ok, err := idem.LastCheckpointValue[booking](ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "reserved", step)
		assert.Equal(t, reserved, v, "the second owner gets exactly the value the first saved")
		assert.Equal(t, "reserved", idem.LastCheckpoint(ctx), "the string form reads the step")
		return idem.CheckpointValue(ctx, "charged", charged)
	})
	rec := storedRecord(t, f, k)
	assert.True(t, utf8.ValidString(rec.Checkpoint), "the stored form is a valid checkpoint")
	assert.NotContains(t, rec.Checkpoint, "\x00")
	f.clock.Advance(2 * time.Minute)

	var step string
	var got booking
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		var ok bool
		var err error
		step, got, ok, err = idem.LastCheckpointValue[booking](ctx)
		if err == nil && !ok {
			err = errors.New("no value")
		}
		return result{}, err
	})
	require.NoError(t, err)
	assert.Equal(t, "charged", step)
	assert.Equal(t, charged, got, "the third owner gets exactly the value the second saved")

	close(r1)
	close(r2)
	require.ErrorIs(t, <-d1, idem.ErrLeaseLost)
	require.ErrorIs(t, <-d2, idem.ErrLeaseLost)
}

// checkpointValueSurvivesFailure records a step with a value and fails: the key's release
// keeps the checkpoint in its tombstone, and the retry resumes from exactly that value.
func (h Harness) checkpointValueSurvivesFailure(t *testing.T) {
	f := h.fixture(t)
	k := key(t)
	boom := errors.New("carrier down")
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		if err := idem.CheckpointValue(ctx, "reserved", reserved); err != nil {
			return result{}, err
		}
		return result{}, boom
	})
	require.ErrorIs(t, err, boom)
	assert.True(t, storedRecord(t, f, k).Released(), "the release left a tombstone")

	v, replayed, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		step, v, ok, err := idem.LastCheckpointValue[booking](ctx)
		if err != nil || !ok {
			return result{}, fmt.Errorf("resume: ok %v: %w", ok, err)
		}
		assert.Equal(t, reserved, v, "the retry gets exactly the value saved")
		return result{Msg: step + " " + v.ReservationID}, nil
	})
	require.NoError(t, err, "the key was released")
	assert.False(t, replayed)
	assert.Equal(t, "reserved r-1", v.Msg)
}

// rawCodec stores a []byte as it is: a codec whose output holds any byte, NUL and
// invalid UTF-8 included.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("raw: %T is not []byte", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw: %T is not *[]byte", v)
	}
	*p = append([]byte(nil), data...)
	return nil
}

// checkpointValueBinaryCodec saves a value whose encoding with the guard's codec holds
// bytes no store keeps in a checkpoint (NUL, invalid UTF-8, a byte of every value); the
// next owner after a crash gets exactly those bytes back.
func (h Harness) checkpointValueBinaryCodec(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute), idem.WithCodec(rawCodec{}))
	k := key(t)
	value := make([]byte, 256)
	for i := range value {
		value[i] = byte(i)
	}
	// The guard's results go through rawCodec too: the owners return []byte.
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) ([]byte, error) {
			err := idem.CheckpointValue(ctx, "step \"1\"\n", value)
			close(started)
			<-release // "crashes": never completes within its lease
			return nil, err
		})
		done <- err
	}()
	<-started
	cp := storedRecord(t, f, k).Checkpoint
	assert.True(t, utf8.ValidString(cp) && !strings.Contains(cp, "\x00"), "the stored form is a valid checkpoint")
	f.clock.Advance(2 * time.Minute)

	var step string
	var got []byte
	_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) ([]byte, error) {
		var err error
		step, got, _, err = idem.LastCheckpointValue[[]byte](ctx)
		return []byte("done"), err
	})
	require.NoError(t, err)
	assert.Equal(t, "step \"1\"\n", step)
	assert.Equal(t, value, got)
	close(release)
	require.ErrorIs(t, <-done, idem.ErrLeaseLost)
}
