package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/redisstore"
)

// The store is a batch store whatever its client: without a pipeline it sends one script
// per record (TestBatchWithoutPipeline).
var _ idemstore.BatchStore = (*redisstore.Store)(nil)

// batchNow is the instant of the batch tests' claims; their records live until an hour
// after it, by the server's clock too.
func batchNow() time.Time { return time.Now().Truncate(time.Millisecond) }

// completedBy returns the completed record of key by token.
func completedBy(key, token string, now time.Time) *idemstore.Record {
	return &idemstore.Record{Key: key, Status: idemstore.StatusCompleted, Expires: now.Add(time.Hour),
		Data: []byte(`{"n":1}`), Encoding: "json", LeaseToken: token, Version: idemstore.SchemaVersion}
}

// withCheckpoint returns rec carrying checkpoint cp numbered seq and fingerprint fp.
func withCheckpoint(rec *idemstore.Record, cp string, seq int64, fp string) *idemstore.Record {
	rec.Checkpoint, rec.CheckpointSeq, rec.Fingerprint = cp, seq, fp
	return rec
}

// sameOutcome asserts that two store answers agree: both nil, or both errors with the same
// sentinels.
func sameOutcome(t *testing.T, single, batch error, msg string) {
	t.Helper()
	assert.Equal(t, single == nil, batch == nil, "%s: single %v, batch %v", msg, single, batch)
	for _, target := range []error{idem.ErrLeaseLost, idem.ErrStore, idemstore.ErrTooLarge, idem.ErrIncompatibleRecord} {
		assert.Equal(t, errors.Is(single, target), errors.Is(batch, target), "%s: %v: single %v, batch %v", msg, target, single, batch)
	}
}

// rekeyed returns a copy of rec under key, so that the records of two keys compare.
func rekeyed(rec *idemstore.Record, key string) *idemstore.Record {
	if rec == nil {
		return nil
	}
	c := *rec
	c.Key = key
	return &c
}

// TestClaimManyMatchesClaim sets each state a record can be in on two keys, claims one with
// Claim and the other, with every other case's, in one ClaimMany, and checks that both
// answer the same (claimed, the record returned, the error) and leave the same record:
// takeovers, tombstones, checkpoints carried or not, a resend of the claim's own token,
// a record over the size limit.
func TestClaimManyMatchesClaim(t *testing.T) {
	s := newStore(t, env.Client(t), redisstore.WithMaxRecordSize(1024))
	ctx := context.Background()
	now := batchNow()
	past := now.Add(-2 * time.Minute) // a lease of a minute taken then has ended by now
	claim := func(rec *idemstore.Record, at time.Time) {
		_, ok, err := s.Claim(ctx, rec, at)
		require.NoError(t, err)
		require.True(t, ok)
	}
	cases := []struct {
		name    string
		setup   func(k string)
		rec     func(k string) *idemstore.Record
		claimed bool
		err     error
	}{
		{"Absent", func(string) {}, func(k string) *idemstore.Record { return inProgress(k, "B", now) }, true, nil},
		{"LiveOther", func(k string) { claim(inProgress(k, "A", now), now) },
			func(k string) *idemstore.Record { return inProgress(k, "B", now) }, false, nil},
		{"OwnTokenResent", func(k string) { claim(inProgress(k, "B", now), now) },
			func(k string) *idemstore.Record { return inProgress(k, "B", now) }, false, nil},
		{"Completed", func(k string) {
			claim(inProgress(k, "A", now), now)
			require.NoError(t, s.Complete(ctx, completedBy(k, "A", now), nil))
		}, func(k string) *idemstore.Record { return inProgress(k, "B", now) }, false, nil},
		{"ExpiredCompleted", func(k string) {
			old := inProgress(k, "A", past)
			old.Expires = now.Add(-time.Second)
			claim(old, past)
			done := completedBy(k, "A", past)
			done.Expires = old.Expires
			require.NoError(t, s.Complete(ctx, done, nil))
		}, func(k string) *idemstore.Record { return inProgress(k, "B", now) }, true, nil},
		{"CrashedOwnerLeaseEnded", func(k string) { claim(inProgress(k, "A", past), past) },
			func(k string) *idemstore.Record { return inProgress(k, "B", now) }, true, nil},
		{"CheckpointCarried", func(k string) {
			claim(withCheckpoint(inProgress(k, "A", past), "", 0, "fp"), past)
			require.NoError(t, s.SetCheckpoint(ctx, k, "A", "charged", 1))
		}, func(k string) *idemstore.Record {
			return withCheckpoint(inProgress(k, "B", now), "charged", 1, "fp")
		}, true, nil},
		{"CheckpointNotCarried", func(k string) {
			claim(withCheckpoint(inProgress(k, "A", past), "", 0, "fp"), past)
			require.NoError(t, s.SetCheckpoint(ctx, k, "A", "charged", 1))
		}, func(k string) *idemstore.Record { return withCheckpoint(inProgress(k, "B", now), "", 0, "fp") }, false, nil},
		{"CheckpointOtherNumber", func(k string) {
			claim(withCheckpoint(inProgress(k, "A", past), "", 0, "fp"), past)
			require.NoError(t, s.SetCheckpoint(ctx, k, "A", "charged", 2))
		}, func(k string) *idemstore.Record {
			return withCheckpoint(inProgress(k, "B", now), "charged", 1, "fp")
		}, false, nil},
		{"CheckpointOtherFingerprint", func(k string) {
			claim(withCheckpoint(inProgress(k, "A", past), "", 0, "fp"), past)
			require.NoError(t, s.SetCheckpoint(ctx, k, "A", "charged", 1))
		}, func(k string) *idemstore.Record {
			return withCheckpoint(inProgress(k, "B", now), "charged", 1, "other")
		}, false, nil},
		{"OwnTombstone", func(k string) {
			claim(inProgress(k, "B", now), now)
			require.NoError(t, s.Release(ctx, k, "B", now))
		}, func(k string) *idemstore.Record { return inProgress(k, "B", now) }, false, nil},
		{"OtherTombstone", func(k string) {
			claim(inProgress(k, "A", now), now)
			require.NoError(t, s.Release(ctx, k, "A", now))
		}, func(k string) *idemstore.Record { return inProgress(k, "B", now) }, true, nil},
		{"TooLarge", func(string) {}, func(k string) *idemstore.Record {
			return withCheckpoint(inProgress(k, "B", now), "", 0, strings.Repeat("f", 2000))
		}, false, idemstore.ErrTooLarge},
	}
	recs := make([]*idemstore.Record, len(cases))
	for i, tc := range cases {
		tc.setup("single/" + tc.name)
		tc.setup("batch/" + tc.name)
		recs[i] = tc.rec("batch/" + tc.name)
	}
	results := s.ClaimMany(ctx, recs, now)
	require.Len(t, results, len(cases))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev, claimed, err := s.Claim(ctx, tc.rec("single/"+tc.name), now)
			got := results[i]
			assert.Equal(t, tc.claimed, claimed, "single")
			assert.Equal(t, tc.claimed, got.Claimed, "batch")
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
			}
			sameOutcome(t, err, got.Err, "claim")
			assert.Equal(t, rekeyed(prev, "k"), rekeyed(got.Prev, "k"), "the record returned")
			stored, err := s.Get(ctx, "single/"+tc.name)
			require.NoError(t, err)
			batchStored, err := s.Get(ctx, "batch/"+tc.name)
			require.NoError(t, err)
			assert.Equal(t, rekeyed(stored, "k"), rekeyed(batchStored, "k"), "the record left")
		})
	}
}

// TestCompleteManyMatchesComplete completes records in each state with Complete and, all
// in one call, with CompleteMany: the same answers (a resend of a completion that landed
// succeeds and writes nothing, another owner's or a tombstone's refuses with
// idem.ErrLeaseLost) and the same records left.
func TestCompleteManyMatchesComplete(t *testing.T) {
	s := newStore(t, env.Client(t), redisstore.WithMaxRecordSize(1024))
	ctx := context.Background()
	now := batchNow()
	claim := func(k, tok string) {
		_, ok, err := s.Claim(ctx, inProgress(k, tok, now), now)
		require.NoError(t, err)
		require.True(t, ok)
	}
	big := func(k string) *idemstore.Record {
		rec := completedBy(k, "B", now)
		rec.Data = []byte(strings.Repeat("x", 2000))
		return rec
	}
	cases := []struct {
		name  string
		setup func(k string)
		rec   func(k string) *idemstore.Record
		want  error
	}{
		{"Owned", func(k string) { claim(k, "B") }, nil, nil},
		{"OwnedWithCheckpoint", func(k string) {
			claim(k, "B")
			require.NoError(t, s.SetCheckpoint(ctx, k, "B", "charged", 1))
		}, nil, nil},
		{"Resent", func(k string) {
			claim(k, "B")
			require.NoError(t, s.Complete(ctx, completedBy(k, "B", now), nil))
		}, nil, nil},
		{"TakenOver", func(k string) { claim(k, "A") }, nil, idem.ErrLeaseLost},
		{"Released", func(k string) {
			claim(k, "B")
			require.NoError(t, s.Release(ctx, k, "B", now))
		}, nil, idem.ErrLeaseLost},
		{"Absent", func(string) {}, nil, idem.ErrLeaseLost},
		{"TooLarge", func(k string) { claim(k, "B") }, big, idemstore.ErrTooLarge},
		{"NoToken", func(k string) { claim(k, "B") }, func(k string) *idemstore.Record { return completedBy(k, "", now) }, nil},
	}
	recs := make([]*idemstore.Record, len(cases))
	rec := func(i int, k string) *idemstore.Record {
		if cases[i].rec != nil {
			return cases[i].rec(k)
		}
		return completedBy(k, "B", now)
	}
	for i, tc := range cases {
		tc.setup("single/" + tc.name)
		tc.setup("batch/" + tc.name)
		recs[i] = rec(i, "batch/"+tc.name)
	}
	results := s.CompleteMany(ctx, recs)
	require.Len(t, results, len(cases))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Complete(ctx, rec(i, "single/"+tc.name), nil)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			if tc.name == "NoToken" {
				assert.Error(t, err)
			}
			sameOutcome(t, err, results[i], "complete")
			stored, err := s.Get(ctx, "single/"+tc.name)
			require.NoError(t, err)
			batchStored, err := s.Get(ctx, "batch/"+tc.name)
			require.NoError(t, err)
			assert.Equal(t, rekeyed(stored, "k"), rekeyed(batchStored, "k"), "the record left")
		})
	}
}

// TestReleaseManyMatchesRelease releases records in each state with Release and, all in
// one call, with ReleaseMany: the same answers and the same tombstones (the checkpoint
// kept, the lease ended at now, the token replaced).
func TestReleaseManyMatchesRelease(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := batchNow()
	claim := func(k, tok string) {
		_, ok, err := s.Claim(ctx, inProgress(k, tok, now), now)
		require.NoError(t, err)
		require.True(t, ok)
	}
	cases := []struct {
		name  string
		setup func(k string)
		want  error
	}{
		{"Owned", func(k string) { claim(k, "B") }, nil},
		{"OwnedWithCheckpoint", func(k string) {
			claim(k, "B")
			require.NoError(t, s.SetCheckpoint(ctx, k, "B", "charged", 1))
		}, nil},
		{"TakenOver", func(k string) { claim(k, "A") }, idem.ErrLeaseLost},
		{"Completed", func(k string) {
			claim(k, "B")
			require.NoError(t, s.Complete(ctx, completedBy(k, "B", now), nil))
		}, idem.ErrLeaseLost},
		{"ReleasedAlready", func(k string) {
			claim(k, "B")
			require.NoError(t, s.Release(ctx, k, "B", now))
		}, idem.ErrLeaseLost},
		{"Absent", func(string) {}, idem.ErrLeaseLost},
	}
	keys, tokens := make([]string, len(cases)), make([]string, len(cases))
	for i, tc := range cases {
		tc.setup("single/" + tc.name)
		tc.setup("batch/" + tc.name)
		keys[i], tokens[i] = "batch/"+tc.name, "B"
	}
	results := s.ReleaseMany(ctx, keys, tokens, now)
	require.Len(t, results, len(cases))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Release(ctx, "single/"+tc.name, "B", now)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			sameOutcome(t, err, results[i], "release")
			stored, err := s.Get(ctx, "single/"+tc.name)
			require.NoError(t, err)
			batchStored, err := s.Get(ctx, "batch/"+tc.name)
			require.NoError(t, err)
			assert.Equal(t, rekeyed(stored, "k"), rekeyed(batchStored, "k"), "the record left")
		})
	}
	for _, err := range s.ReleaseMany(ctx, keys, tokens[:1], now) {
		assert.Error(t, err, "keys and tokens differ in number")
	}
}

// newRecs returns in-progress records of n keys named after prefix, by token.
func newRecs(prefix, token string, n int, now time.Time) []*idemstore.Record {
	recs := make([]*idemstore.Record, n)
	for i := range recs {
		recs[i] = inProgress(fmt.Sprintf("%s-%d", prefix, i), token, now)
	}
	return recs
}

// TestClaimManyConcurrentSingleClaims races a batch claim against single claims of the same
// keys, each its own goroutine: every key is held by exactly one of them, and the other
// learns whose record holds it.
func TestClaimManyConcurrentSingleClaims(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := batchNow()
	for round := range 20 {
		recs := newRecs(fmt.Sprintf("race%d", round), "batch", 10, now)
		single := make([]bool, len(recs))
		singlePrev := make([]*idemstore.Record, len(recs))
		var batch []idemstore.ClaimResult
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			batch = s.ClaimMany(ctx, recs, now)
		}()
		for i := range recs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				singlePrev[i], single[i], err = s.Claim(ctx, inProgress(recs[i].Key, "single", now), now)
				assert.NoError(t, err)
			}()
		}
		close(start)
		wg.Wait()
		for i, r := range batch {
			require.NoError(t, r.Err)
			assert.NotEqual(t, single[i], r.Claimed, "key %d: exactly one claim holds it", i)
			if r.Claimed {
				assert.Equal(t, "batch", singlePrev[i].LeaseToken)
			} else {
				assert.Equal(t, "single", r.Prev.LeaseToken)
			}
		}
	}
}

// TestBatchLeaseEndsMidBatch: a batch claims three keys; one lease ends and another owner
// takes that key over before the batch records its outcomes. Only that key's completion
// (or release) is refused, with idem.ErrLeaseLost, and the new owner's record stays.
func TestBatchLeaseEndsMidBatch(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := batchNow()
	later := now.Add(2 * time.Minute) // past the batch's leases of a minute
	for _, settle := range []string{"complete", "release"} {
		t.Run(settle, func(t *testing.T) {
			recs := newRecs(settle, "A", 3, now)
			for _, r := range s.ClaimMany(ctx, recs, now) {
				require.NoError(t, r.Err)
				require.True(t, r.Claimed)
			}
			prev, ok, err := s.Claim(ctx, inProgress(recs[1].Key, "B", later), later)
			require.NoError(t, err)
			require.True(t, ok, "the ended lease is taken over")
			assert.Equal(t, "A", prev.LeaseToken)

			var errs []error
			if settle == "complete" {
				done := make([]*idemstore.Record, len(recs))
				for i, r := range recs {
					done[i] = completedBy(r.Key, "A", now)
				}
				errs = s.CompleteMany(ctx, done)
			} else {
				errs = s.ReleaseMany(ctx, []string{recs[0].Key, recs[1].Key, recs[2].Key}, []string{"A", "A", "A"}, later)
			}
			require.Len(t, errs, 3)
			assert.NoError(t, errs[0])
			assert.ErrorIs(t, errs[1], idem.ErrLeaseLost)
			assert.NoError(t, errs[2])
			got, err := s.Get(ctx, recs[1].Key)
			require.NoError(t, err)
			assert.Equal(t, "B", got.LeaseToken)
			assert.Equal(t, idemstore.StatusInProgress, got.Status)
		})
	}
}

// TestBatchResentLate replays a batch's pipelines as a client's resend would deliver
// them, after later writes: a claim pipeline landing after the batch released its keys is
// refused by the tombstones of its own token and holds nothing; one landing while the
// batch still holds them finds its own token (the guard then owns the key); a completion
// pipeline sent again writes nothing twice; a completion landing after a takeover lands
// nothing.
func TestBatchResentLate(t *testing.T) {
	s := newStore(t, env.Client(t))
	ctx := context.Background()
	now := batchNow()

	t.Run("ClaimsAfterRelease", func(t *testing.T) {
		recs := newRecs("released", "A", 5, now)
		for _, r := range s.ClaimMany(ctx, recs, now) {
			require.True(t, r.Claimed)
		}
		keys, toks := make([]string, len(recs)), make([]string, len(recs))
		for i, r := range recs {
			keys[i], toks[i] = r.Key, "A"
		}
		for _, err := range s.ReleaseMany(ctx, keys, toks, now) {
			require.NoError(t, err)
		}
		for i, r := range s.ClaimMany(ctx, recs, now) { // the first attempt, landing late
			require.NoError(t, r.Err)
			assert.False(t, r.Claimed, "key %d: a late claim took the key again", i)
			assert.Equal(t, idemstore.ReleasedToken("A"), r.Prev.LeaseToken)
		}
		// A claim of another owner takes each tombstone over at once.
		for _, r := range s.ClaimMany(ctx, newRecs("released", "B", 5, now), now) {
			require.NoError(t, r.Err)
			assert.True(t, r.Claimed)
		}
	})
	t.Run("ClaimsWhileHeld", func(t *testing.T) {
		recs := newRecs("held", "A", 5, now)
		for _, r := range s.ClaimMany(ctx, recs, now) {
			require.True(t, r.Claimed)
		}
		for _, r := range s.ClaimMany(ctx, recs, now) {
			require.NoError(t, r.Err)
			assert.False(t, r.Claimed)
			assert.Equal(t, "A", r.Prev.LeaseToken, "the claim's own record: the guard owns the key")
		}
	})
	t.Run("CompletionsResent", func(t *testing.T) {
		recs := newRecs("completed", "A", 5, now)
		for _, r := range s.ClaimMany(ctx, recs, now) {
			require.True(t, r.Claimed)
		}
		done := make([]*idemstore.Record, len(recs))
		for i, r := range recs {
			done[i] = completedBy(r.Key, "A", now)
		}
		for _, err := range s.CompleteMany(ctx, done) {
			require.NoError(t, err)
		}
		first, err := s.Get(ctx, recs[0].Key)
		require.NoError(t, err)
		resent := make([]*idemstore.Record, len(recs))
		for i, r := range recs {
			resent[i] = completedBy(r.Key, "A", now.Add(time.Minute))
			resent[i].Data = []byte(`{"n":2}`)
		}
		for _, err := range s.CompleteMany(ctx, resent) {
			assert.NoError(t, err)
		}
		again, err := s.Get(ctx, recs[0].Key)
		require.NoError(t, err)
		assert.Equal(t, first, again, "a resent completion wrote the record again")
	})
	t.Run("CompletionsAfterTakeover", func(t *testing.T) {
		later := now.Add(2 * time.Minute)
		recs := newRecs("fenced", "A", 3, now)
		for _, r := range s.ClaimMany(ctx, recs, now) {
			require.True(t, r.Claimed)
		}
		for _, r := range s.ClaimMany(ctx, newRecs("fenced", "B", 3, later), later) {
			require.True(t, r.Claimed, "the ended leases are taken over")
		}
		done := make([]*idemstore.Record, len(recs))
		for i, r := range recs {
			done[i] = completedBy(r.Key, "A", now)
		}
		for _, err := range s.CompleteMany(ctx, done) {
			assert.ErrorIs(t, err, idem.ErrLeaseLost)
		}
		for _, r := range recs {
			got, err := s.Get(ctx, r.Key)
			require.NoError(t, err)
			assert.Equal(t, "B", got.LeaseToken)
			assert.Equal(t, idemstore.StatusInProgress, got.Status)
		}
	})
}

// TestBatchFailures: a batch whose context has ended, or whose server cannot be reached,
// fails each record with an error wrapping idem.ErrStore, and holds no key; an empty batch
// sends nothing.
func TestBatchFailures(t *testing.T) {
	now := batchNow()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = down.Close() })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		client *redis.Client
		ctx    context.Context
		target error
	}{
		{"ContextEnded", env.Client(t), cancelled, context.Canceled},
		{"ServerDown", down, context.Background(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.client)
			recs := newRecs("k", "A", 3, now)
			check := func(err error) {
				assert.ErrorIs(t, err, idem.ErrStore)
				if tc.target != nil {
					assert.ErrorIs(t, err, tc.target)
				}
			}
			for _, r := range s.ClaimMany(tc.ctx, recs, now) {
				check(r.Err)
				assert.False(t, r.Claimed)
				assert.Nil(t, r.Prev)
			}
			for _, err := range s.CompleteMany(tc.ctx, []*idemstore.Record{completedBy("k-0", "A", now)}) {
				check(err)
			}
			for _, err := range s.ReleaseMany(tc.ctx, []string{"k-0"}, []string{"A"}, now) {
				check(err)
			}
		})
	}
	t.Run("Empty", func(t *testing.T) {
		client, c := countedClient(t)
		s := newStore(t, client)
		assert.Empty(t, s.ClaimMany(context.Background(), nil, now))
		assert.Empty(t, s.CompleteMany(context.Background(), nil))
		assert.Empty(t, s.ReleaseMany(context.Background(), nil, nil, now))
		assert.Empty(t, c.take())
	})
}

// scriptsOnly is a client without a pipeline: it has only what [redisstore.Client] asks.
type scriptsOnly struct{ redisstore.Client }

// TestBatchWithoutPipeline: with a client that cannot pipeline, a batch sends one script per
// record, with the same outcomes.
func TestBatchWithoutPipeline(t *testing.T) {
	client, c := countedClient(t)
	s := newStore(t, scriptsOnly{client})
	ctx := context.Background()
	now := batchNow()
	recs := newRecs("k", "A", 3, now)
	_, _, err := s.Claim(ctx, inProgress("warm", "A", now), now) // load the script
	require.NoError(t, err)
	c.take()
	for _, r := range s.ClaimMany(ctx, recs, now) {
		require.NoError(t, r.Err)
		assert.True(t, r.Claimed)
	}
	assert.Equal(t, []string{"evalsha", "evalsha", "evalsha"}, c.take())
	for _, r := range s.ClaimMany(ctx, newRecs("k", "B", 3, now), now) {
		require.NoError(t, r.Err)
		assert.False(t, r.Claimed)
		assert.Equal(t, "A", r.Prev.LeaseToken)
	}
}
