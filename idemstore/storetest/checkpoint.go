package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func (h Harness) checkpoint(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	k := key(t)
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
			assert.Empty(t, idem.LastCheckpoint(ctx))
			if err := idem.Checkpoint(ctx, "payment_charged"); err != nil {
				return result{}, err
			}
			assert.Equal(t, "payment_charged", idem.LastCheckpoint(ctx))
			close(started)
			<-release // "crashes": never completes within its lease
			return result{}, nil
		})
		done <- err
	}()
	<-started
	f.clock.Advance(2 * time.Minute)
	v, _, err := do(h, context.Background(), f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		return result{Msg: idem.LastCheckpoint(ctx)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "payment_charged", v.Msg)

	close(release)
	require.ErrorIs(t, <-done, idem.ErrLeaseLost)
	assert.ErrorIs(t, idem.Checkpoint(context.Background(), "x"), idem.ErrNoLease)
}

func (h Harness) checkpointTwoTakeovers(t *testing.T) {
	f := h.fixture(t, idem.WithLease(time.Minute))
	h.checkpointTakeovers(t, f.guard, f.clock)
}

// checkpointTakeovers has an owner of a new key record a checkpoint and die, a second owner
// take over and die, and a third take over; the second and third must see the checkpoint.
func (h Harness) checkpointTakeovers(t *testing.T, g *idem.Guard, clock *SettableClock) {
	k := key(t)
	r1, d1 := blockOwner(h, t, context.Background(), g, k, result{}, func(ctx context.Context) error { return idem.Checkpoint(ctx, "payment_charged") })
	clock.Advance(2 * time.Minute)
	seen := ""
	r2, d2 := blockOwner(h, t, context.Background(), g, k, result{}, func(ctx context.Context) error { seen = idem.LastCheckpoint(ctx); return nil })
	assert.Equal(t, "payment_charged", seen, "the second owner knows the card was charged")
	clock.Advance(2 * time.Minute)
	v, _, err := do(h, context.Background(), g, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
		return result{Msg: idem.LastCheckpoint(ctx)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "payment_charged", v.Msg, "the third owner still knows the card was charged")
	close(r1)
	close(r2)
	require.ErrorIs(t, <-d1, idem.ErrLeaseLost)
	require.ErrorIs(t, <-d2, idem.ErrLeaseLost)
}

// checkpointResentTakeover takes over checkpointed keys with claims whose answers are lost
// and which are sent again (the SDK's retry after a broken connection): the resend meets
// the record its first attempt wrote, and the checkpoint must be in it.
func (h Harness) checkpointResentTakeover(t *testing.T) {
	s := NewFaulty(h.NewStore(t))
	c := NewSettableClock()
	g, err := idem.New(s, "test", idem.WithClock(c), idem.WithScope("suite"), idem.WithLease(time.Minute))
	require.NoError(t, err)
	s.ResendClaims(true)
	h.checkpointTakeovers(t, g, c)
}

// checkpointSurvivesFailure records a checkpoint and then fails, with an error or a panic:
// the key is released for a retry, and the retry resumes from the checkpoint.
func (h Harness) checkpointSurvivesFailure(t *testing.T) {
	boom := errors.New("charged, then failed")
	for _, panics := range []bool{false, true} {
		name := map[bool]string{false: "Error", true: "Panic"}[panics]
		t.Run(name, func(t *testing.T) {
			f := h.fixture(t)
			k := key(t)
			ctx := context.Background()
			recovered := func() (r any) {
				defer func() { r = recover() }()
				_, _, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
					if err := idem.Checkpoint(ctx, "charged"); err != nil {
						return result{}, err
					}
					if panics {
						panic(boom)
					}
					return result{}, boom
				})
				require.ErrorIs(t, err, boom)
				return nil
			}()
			if panics {
				assert.Equal(t, boom, recovered, "the panic goes on")
			}
			v, replayed, err := do(h, ctx, f.guard, idem.Request{Key: k}, func(ctx context.Context) (result, error) {
				return result{Msg: idem.LastCheckpoint(ctx)}, nil
			})
			require.NoError(t, err, "the key was released")
			assert.False(t, replayed)
			assert.Equal(t, "charged", v.Msg, "the retry resumes from the checkpoint")
		})
	}
}
