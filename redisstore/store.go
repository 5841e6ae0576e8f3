package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Client is what the store calls on a Redis client: scripts, and HGETALL for [Store.Get].
// A *redis.Client (standalone or ElastiCache Serverless), a *redis.ClusterClient, a
// *redis.Ring and any redis.UniversalClient satisfy it.
type Client interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// Store is the Redis (and Valkey) [idemstore.Store]: one hash per record, under the record's
// key with the store's prefix, and one Lua script per state change, so each is atomic and
// one round trip. It is safe for concurrent use.
//
// Round trips:
//   - a claim is one script whether it wins or meets a live record (the refusing record
//     comes back in the same reply);
//   - a completion, a release (with or without a checkpoint to keep), an extension and a
//     checkpoint are one script each; a get is one HGETALL;
//   - a batch's claims ([Store.ClaimMany]), its completions ([Store.CompleteMany]) and its
//     releases ([Store.ReleaseMany]) each go in one pipeline of the same scripts, one per
//     cluster node: a batch of new keys costs two, a redelivered batch of finished ones one
//     (Store is an [idemstore.BatchStore]);
//   - the first time a script runs on a server (or after it restarted) it costs one more:
//     EVALSHA answers NOSCRIPT and EVAL sends the script itself.
//
// Store supports no attached writes ([idem.Attach]): see [ErrAttachUnsupported].
type Store struct {
	client Client
	cfg    config
}

// New returns a Store that keeps records in Redis through client. It returns an error
// naming the option for bad options, and for a nil client.
func New(client Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, optErr("New", "client must not be nil")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Store{client: client, cfg: cfg}, nil
}

// RedisKey returns the Redis key of the record stored under key: the store's prefix and
// key.
func (s *Store) RedisKey(key string) string { return s.cfg.prefix + key }

// Claim implements [idemstore.Store] with one script that reads the record and, in the same
// atomic step, replaces it when it no longer holds the key for rec (absent, past its
// expiry, or in progress past its lease end with rec's checkpoint, its number and rec's
// fingerprint, or with none where rec carries none, unless it is the tombstone of the
// release of rec's own token: see [Store.Release]) or returns it. now is the caller's
// clock, never the server's: see the package documentation. The server deletes the new
// record (PEXPIREAT) at rec.Expires plus the expiry grace ([WithExpiryGrace]). A record
// over the store's size limit yields [idemstore.ErrTooLarge]; a record that does not
// decode, an error wrapping [idem.ErrIncompatibleRecord].
func (s *Store) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	c := s.claimCall(rec, now)
	if c.err != nil {
		return nil, false, c.err
	}
	reply, err := s.run(ctx, c.script, c.key, c.args)
	if err != nil {
		return nil, false, s.fail("claim", err)
	}
	return s.claimReply(rec, reply)
}

// claimCall returns the claim script's call for rec at now, or a call carrying
// [idemstore.ErrTooLarge] for a record over the size limit.
func (s *Store) claimCall(rec *idemstore.Record, now time.Time) call {
	key := s.RedisKey(rec.Key)
	fields := fieldArgs(rec, true)
	if err := s.checkSize("claim", key, rec, fields); err != nil {
		return call{err: err}
	}
	args := append([]any{strconv.FormatInt(nowMillis(now), 10), rec.Checkpoint, strconv.FormatInt(expireAt(rec, s.cfg.expiryGrace), 10),
		idemstore.ReleasedToken(rec.LeaseToken), strconv.FormatInt(rec.CheckpointSeq, 10), rec.Fingerprint}, fields...)
	return call{script: claimScript, key: key, args: args}
}

// claimReply turns the claim script's reply for rec into [idemstore.Store.Claim]'s
// results.
func (s *Store) claimReply(rec *idemstore.Record, reply any) (*idemstore.Record, bool, error) {
	list, ok := reply.([]any)
	if !ok || len(list) != 2 {
		return nil, false, s.fail("claim", fmt.Errorf("redisstore: unexpected claim reply %v", reply))
	}
	claimed := list[0] == int64(1)
	fm, err := pairsToMap(list[1])
	if err != nil {
		return nil, false, s.fail("claim", err)
	}
	if len(fm) == 0 {
		if !claimed {
			return nil, false, s.fail("claim", errors.New("redisstore: claim refused without a record"))
		}
		return nil, true, nil
	}
	prev, err := decodeRecord(rec.Key, fm)
	if claimed {
		// The claim holds already: an old record that does not decode (an expired record of
		// a newer schema, say) is dropped rather than failing it.
		if err != nil {
			return nil, true, nil
		}
		return prev, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return prev, false, nil
}

// Get implements [idemstore.Store] with one HGETALL. Redis reads are strongly consistent on the
// primary the client talks to (do not point the store at a replica). It returns nil and no
// error when there is no record, and an error wrapping [idem.ErrIncompatibleRecord] for a
// hash that does not decode.
func (s *Store) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	var fields map[string]string
	err := s.await(ctx, func(ctx context.Context) error {
		var err error
		fields, err = s.client.HGetAll(ctx, s.RedisKey(key)).Result()
		return err
	})
	if err != nil {
		return nil, s.fail("get", err)
	}
	if len(fields) == 0 {
		return nil, nil
	}
	return decodeRecord(key, fields)
}

// Complete implements [idemstore.Store] with one script that replaces the in-progress
// record with rec if its lease token is still rec.LeaseToken, and has the server delete it
// (PEXPIREAT) at rec.Expires plus the expiry grace ([WithExpiryGrace]). The stored
// checkpoint is kept and the lease end removed. A resend of a completion that landed finds
// the record completed under rec's token and returns nil without writing it again. A token
// that no longer owns the record yields [idem.ErrLeaseLost]; a record over the size limit,
// [idemstore.ErrTooLarge] (nothing is sent).
//
// Attached writes are refused before anything is sent, with an error wrapping
// [ErrAttachUnsupported], [idemstore.ErrNotCommitted] and [idem.ErrStore]: the guard then
// releases the key, so a retry runs again rather than meeting a stuck record.
func (s *Store) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if len(attached) > 0 {
		return &idem.StoreError{Op: "complete", Err: fmt.Errorf("redisstore: complete: %w: %w (%d attached, the first a %T)",
			idemstore.ErrNotCommitted, ErrAttachUnsupported, len(attached), attached[0])}
	}
	c := s.completeCall(rec)
	if c.err != nil {
		return c.err
	}
	return s.owned(ctx, "complete", c.script, c.key, c.args)
}

// completeCall returns the completion script's call for rec, or a call carrying the
// error of a record without a lease token or over the size limit.
func (s *Store) completeCall(rec *idemstore.Record) call {
	if rec.LeaseToken == "" {
		return call{err: errors.New("redisstore: complete: record has no lease token")}
	}
	key := s.RedisKey(rec.Key)
	fields := fieldArgs(rec, false)
	if err := s.checkSize("complete", key, rec, fields); err != nil {
		return call{err: err}
	}
	args := append([]any{rec.LeaseToken, strconv.FormatInt(expireAt(rec, s.cfg.expiryGrace), 10)}, fields...)
	return call{script: completeScript, key: key, args: args}
}

// Release implements [idemstore.Store] with one script that keeps the record as a
// tombstone, never deleting it: its lease ended at now and its token replaced by
// [idemstore.ReleasedToken](token), its checkpoint and its server-side expiry as they were.
// A claim made from then on takes it over at once; a claim sent before the release and
// delivered after it is refused rather than hold the key again. A token that does
// not own an in-progress record yields [idem.ErrLeaseLost].
func (s *Store) Release(ctx context.Context, key, token string, now time.Time) error {
	return s.owned(ctx, "release", releaseScript, s.RedisKey(key), releaseArgs(token, now))
}

// releaseArgs returns the release script's arguments for token at now.
func releaseArgs(token string, now time.Time) []any {
	return []any{token, idemstore.ReleasedToken(token), strconv.FormatInt(nowMillis(now), 10)}
}

// Extend implements [idemstore.Store] with one script that moves the lease end of the
// in-progress record owned by token to leaseExpires, unless the stored end is later
// already: an extension never shortens a lease. A token that does not own an in-progress
// record yields [idem.ErrLeaseLost].
func (s *Store) Extend(ctx context.Context, key, token string, leaseExpires time.Time) error {
	end := strconv.FormatInt(endMillis(leaseExpires), 10)
	return s.owned(ctx, "extend", extendScript, s.RedisKey(key), []any{token, end})
}

// SetCheckpoint implements [idemstore.Store] with one script that sets the checkpoint of the
// in-progress record owned by token, and its number seq, if the stored number is below
// seq; a record that holds checkpoint at seq already (a resend) is success. A token that
// does not own an in-progress record, or a late write that meets a checkpoint numbered as
// high or higher, yields [idem.ErrLeaseLost] and changes nothing.
func (s *Store) SetCheckpoint(ctx context.Context, key, token, checkpoint string, seq int64) error {
	return s.owned(ctx, "checkpoint", checkpointScript, s.RedisKey(key), []any{token, checkpoint, strconv.FormatInt(seq, 10)})
}

// owned runs script, a write conditional on the lease token that answers 1 when it holds
// and 0 when it does not, and maps 0 to [idem.ErrLeaseLost].
func (s *Store) owned(ctx context.Context, op string, script *redis.Script, key string, args []any) error {
	reply, err := s.run(ctx, script, key, args)
	return s.ownedReply(op, reply, err)
}

// ownedReply maps the reply or error of a write conditional on the lease token (1 when it
// holds, 0 when it does not) to op's error: nil, [idem.ErrLeaseLost], or a failure.
func (s *Store) ownedReply(op string, reply any, err error) error {
	if err != nil {
		return s.fail(op, err)
	}
	switch reply {
	case int64(1):
		return nil
	case int64(0):
		return fmt.Errorf("redisstore: %s: %w", op, idem.ErrLeaseLost)
	}
	return s.fail(op, fmt.Errorf("redisstore: unexpected %s reply %v", op, reply))
}

// run runs script on key with args and returns its reply.
func (s *Store) run(ctx context.Context, script *redis.Script, key string, args []any) (any, error) {
	var reply any
	err := s.await(ctx, func(ctx context.Context) error {
		var err error
		reply, err = script.Run(ctx, s.client, []string{key}, args...).Result()
		return err
	})
	if err != nil {
		// reply is not read: after ctx ended, the call may still be writing it.
		return nil, err
	}
	return reply, nil
}

// await runs call and returns its error, or ctx's error as soon as ctx ends. A context
// that cannot end (Done nil) runs call directly; any other runs call in a goroutine that
// outlives an ended ctx until the client gives up on the command, whose outcome is then
// unknown to the caller, as with any answer that was lost.
func (s *Store) await(ctx context.Context, call func(context.Context) error) error {
	// Why a goroutine: go-redis stops a command at its context's deadline only with
	// ContextTimeoutEnabled, and on cancellation never: it waits for the server up to the
	// client's ReadTimeout (TestGoRedisIgnoresCancellation). The idemstore.Store contract
	// wants every method to return once its context ends (the guard cancels a lease
	// extension in flight and waits for it). The connection stays with the goroutine until
	// the reply is read or the client discards it, so no later command reads the late
	// reply (TestCancelledCallLeavesNoStaleReply). The goroutine is most of the store's
	// cost over the raw commands: on the benchmark machine about 18 µs a command
	// (idem-bench W1 88 µs p50 against 51 µs run directly; BENCHMARKS.md, issue 27).
	if ctx.Done() == nil {
		return call(ctx)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkSize returns [idemstore.ErrTooLarge] when rec, stored under key with fields, is over the
// store's size limit.
func (s *Store) checkSize(op, key string, rec *idemstore.Record, fields []any) error {
	if n := recordSize(key, rec, fields); n > s.cfg.maxRecordSize {
		return fmt.Errorf("redisstore: %s: %w: %d bytes, limit %d (WithMaxRecordSize)", op, idemstore.ErrTooLarge, n, s.cfg.maxRecordSize)
	}
	return nil
}

// fail wraps a failure of op as an [*idem.StoreError], so that errors.Is(err,
// [idem.ErrStore]) holds and errors.As still reaches the client's error.
func (s *Store) fail(op string, err error) error {
	return &idem.StoreError{Op: op, Err: err}
}

// CheckAttached implements [idemstore.AttachChecker]: idem.Attach refuses every attached
// write at once, in the handler, with an error wrapping [ErrAttachUnsupported], rather
// than failing the completion after the handler's work is done.
func (s *Store) CheckAttached(attached []any) error {
	if len(attached) == 0 {
		return nil
	}
	return fmt.Errorf("%w: attached write %d is %T", ErrAttachUnsupported, len(attached)-1, attached[len(attached)-1])
}
