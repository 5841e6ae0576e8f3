package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lab/bench"
)

// redisFloor runs X1 and X2 on Redis: the two plain commands a hand-written idempotency
// check sends, on the bench's client and the keys the store would use, with no script.
//   - The claim is SET key record NX GET PXAT: it writes the in-progress record where none
//     is, and returns the one that is there in the same round trip (Redis 7+).
//   - The completion is SET key record XX PXAT: unconditional on the owner, which the
//     store's script checks (the floor leaves fencing out).
//
// The records are strings with the fields the store's hash holds (status, version,
// expiry, lease end, token; the result and its encoding once completed), so the bytes on
// the wire are close to the store's.
type redisFloor struct {
	b      *bench.Bench
	client *redis.Client
	prefix string
	keys   []rawKey
}

// redisRecord is the record string of the floor, with the hash's field names.
func redisRecord(status idemstore.Status, exp, lease time.Time, tok, data string) string {
	s := "status=" + string(status) + ";v=" + strconv.Itoa(idemstore.SchemaVersion) +
		";expiration=" + strconv.FormatInt(exp.UnixMilli(), 10) + ";lease_token=" + tok
	if data == "" {
		return s + ";in_progress_expiration=" + strconv.FormatInt(lease.UnixMilli(), 10)
	}
	return s + ";enc=json;data=" + data
}

// claim sends the floor's claim of k by tok, with a lease to ctx's deadline, and returns
// the record that was there ("" for none).
func (x *redisFloor) claim(ctx context.Context, k rawKey, tok string) (string, error) {
	now := time.Now()
	lease, _ := ctx.Deadline()
	exp := now.Add(bench.Expiry)
	old, err := x.client.SetArgs(ctx, x.prefix+k.key, redisRecord(idemstore.StatusInProgress, exp, lease, tok, ""),
		redis.SetArgs{Mode: "NX", Get: true, ExpireAt: exp}).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return old, err
}

// setComplete is X1_raw_redis_set_nx_set: for each fresh key, the claim and the completion.
func (x *redisFloor) setComplete() *bench.Result {
	r, failed := x.b.Sequential("X1_raw_redis_set_nx_set", "invocation", len(x.keys), x.newKey)
	r.Check(failed == 0, "%d claims or completions failed", failed)
	return r
}

// newKey is X1's operation on key i: the claim and the completion.
func (x *redisFloor) newKey(ctx context.Context, i int) bool {
	k, tok := x.keys[i], bench.Token()
	old, err := x.claim(ctx, k, tok)
	if err != nil || old != "" {
		return false
	}
	exp := time.Now().Add(bench.Expiry)
	return x.client.SetArgs(ctx, x.prefix+k.key, redisRecord(idemstore.StatusCompleted, exp, time.Time{}, tok, k.data),
		redis.SetArgs{Mode: "XX", ExpireAt: exp}).Err() == nil
}

// setConflict is X2_raw_redis_set_nx_conflict: the same keys again, the claim alone, which
// finds the completed record and returns it.
func (x *redisFloor) setConflict() *bench.Result {
	r, failed := x.b.Sequential("X2_raw_redis_set_nx_conflict", "invocation", len(x.keys), x.replay)
	r.Check(failed == 0, "%d claims did not return the completed record", failed)
	return r
}

// replay is X2's operation on key i: the claim, which returns the completed record.
func (x *redisFloor) replay(ctx context.Context, i int) bool {
	old, err := x.claim(ctx, x.keys[i], bench.Token())
	return err == nil && old != ""
}
