package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// fingerprint is the stored form of a request fingerprint.
func fingerprint(fp string) string {
	sum := sha256.Sum256([]byte(fp))
	return hex.EncodeToString(sum[:])
}

// deadRecord is the record of an owner that died at now-2m, with a one-minute lease.
func deadRecord(key string, now time.Time, checkpoint, fp string) idemstore.Record {
	return idemstore.Record{
		Key: key, Status: idemstore.StatusInProgress, Expires: now.Add(time.Hour), LeaseExpires: now.Add(-time.Minute),
		Fingerprint: fp, LeaseToken: "dead", Checkpoint: checkpoint, Version: idemstore.SchemaVersion,
	}
}

// runSeeing makes one call of req on g whose handler notes the checkpoint it starts from.
func runSeeing(g *idem.Guard, req idem.Request) (runs int, seen string, err error) {
	_, _, err = idem.Do(context.Background(), g, req, func(ctx context.Context) (int, error) {
		runs++
		seen = idem.LastCheckpoint(ctx)
		return 1, nil
	})
	return runs, seen, err
}

// TestTakeoverCarriesCheckpoint takes over records whose owners died, and counts the store
// calls: a checkpoint costs one more claim, which carries it into the new record.
func TestTakeoverCarriesCheckpoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		existing   func(key string, now time.Time) idemstore.Record
		requestFP  string // "" : no fingerprint
		wantErr    error
		wantSeen   string
		wantCounts map[string]int
	}{
		{
			name:       "CheckpointSameRequest",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", fingerprint("A")) },
			requestFP:  "A",
			wantSeen:   "charged",
			wantCounts: map[string]int{"claim": 2, "complete": 1},
		},
		{
			name:       "CheckpointWithoutFingerprint",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", fingerprint("A")) },
			wantSeen:   "charged",
			wantCounts: map[string]int{"claim": 2, "complete": 1},
		},
		{
			name:       "CheckpointOtherRequest",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "charged", fingerprint("A")) },
			requestFP:  "B",
			wantErr:    idem.ErrPayloadMismatch,
			wantCounts: map[string]int{"claim": 1},
		},
		{
			name:       "NoCheckpointOtherRequest",
			existing:   func(k string, now time.Time) idemstore.Record { return deadRecord(k, now, "", fingerprint("A")) },
			requestFP:  "B",
			wantCounts: map[string]int{"claim": 1, "complete": 1},
		},
		{
			name: "ExpiredWithCheckpoint",
			existing: func(k string, now time.Time) idemstore.Record {
				r := deadRecord(k, now, "charged", fingerprint("A"))
				r.Expires = now.Add(-time.Second)
				return r
			},
			requestFP:  "A",
			wantSeen:   "",
			wantCounts: map[string]int{"claim": 1, "complete": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := memstore.New()
			s := newCounting(mem)
			clock := storetest.NewClock()
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithScope("takeover"))
			require.NoError(t, err)
			req := idem.Request{Key: "k"}
			if tc.requestFP != "" {
				req.Fingerprint = []byte(tc.requestFP)
			}
			sk, err := g.StoredKey(req)
			require.NoError(t, err)
			mem.Put(tc.existing(sk, clock.Now()))

			runs, seen, err := runSeeing(g, req)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, runs)
				rec, err := mem.Get(context.Background(), sk)
				require.NoError(t, err)
				assert.Equal(t, "dead", rec.LeaseToken, "the dead owner's record stays")
			} else {
				require.NoError(t, err)
				assert.Equal(t, 1, runs)
				assert.Equal(t, tc.wantSeen, seen)
			}
			assert.Equal(t, tc.wantCounts, s.counts())
		})
	}
}

// movingCheckpoint is a store whose dead owner, still running past its lease, moves its
// checkpoint before each of the first moves claims.
type movingCheckpoint struct {
	*memstore.Store
	moves, moved int
}

func (s *movingCheckpoint) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	if s.moved < s.moves {
		s.moved++
		if err := s.SetCheckpoint(ctx, rec.Key, "dead", fmt.Sprintf("step-%d", s.moved)); err != nil {
			return nil, false, err
		}
	}
	return s.Store.Claim(ctx, rec, now)
}

// TestTakeoverWhileCheckpointMoves takes over a record whose lease ended while its owner
// still moves its checkpoint: the claim carries the latest, and gives up (in progress)
// after a bounded number of attempts.
func TestTakeoverWhileCheckpointMoves(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		moves    int
		wantErr  error
		wantSeen string
	}{
		{"MovesOnce", 1, nil, "step-1"},
		{"MovesTwice", 2, nil, "step-2"},
		{"KeepsMoving", 100, idem.ErrInProgress, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &movingCheckpoint{Store: memstore.New(), moves: tc.moves}
			clock := storetest.NewClock()
			g, err := idem.New(s, "test", idem.WithClock(clock), idem.WithScope("moving"))
			require.NoError(t, err)
			sk, err := g.StoredKey(idem.Request{Key: "k"})
			require.NoError(t, err)
			s.Put(deadRecord(sk, clock.Now(), "step-0", ""))

			runs, seen, err := runSeeing(g, idem.Request{Key: "k"})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, runs)
				assert.Equal(t, 3, s.moved, "three claims, then the caller is told to retry")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantSeen, seen)
		})
	}
}
