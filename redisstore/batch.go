package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemstore"
)

// pipeliner is what the batch methods need of a client beyond [Client]: a pipeline.
// *redis.Client, *redis.ClusterClient, *redis.Ring and every redis.UniversalClient have
// one. With a client that has none, each record of a batch costs a round trip of its own.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// call is one script of a batch: the script, the record's Redis key and its arguments.
// A call whose err is set before the batch is sent (a record over the size limit, say) is
// not sent: err is its answer.
type call struct {
	script *redis.Script
	key    string
	args   []any
	err    error
}

// ClaimMany implements [idemstore.BatchStore]: each record's claim is the script of
// [Store.Claim], and all of them go in one pipeline: one round trip for the batch, whether
// the keys are new, recorded or in flight (in cluster mode, one pipeline to each node that
// holds some of the keys, concurrently; on a server without the script yet, one more, as
// for a single claim). Each record's outcome is exactly that of a single claim:
//   - a takeover returns the record it replaced, a refused claim the record that refused
//     it; the tombstone of the release of the record's own token refuses it, and a record
//     of its own token comes back as the refusing one;
//   - a record over the size limit yields [idemstore.ErrTooLarge] and is not sent; one
//     that does not decode, an error wrapping idem.ErrIncompatibleRecord;
//   - a failed round trip fails each claim it carried with an error wrapping
//     idem.ErrStore: whether it was applied is unknown, as with any lost answer.
//
// The scripts are atomic each, not together: a claim of the batch and a concurrent claim
// of the same key are ordered by the server, and exactly one of them holds the key.
func (s *Store) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	calls := make([]call, len(recs))
	for i, rec := range recs {
		calls[i] = s.claimCall(rec, now)
	}
	replies, errs := s.runMany(ctx, calls)
	for i, rec := range recs {
		switch {
		case calls[i].err != nil:
			out[i].Err = calls[i].err
		case errs[i] != nil:
			out[i].Err = s.fail("claim", errs[i])
		default:
			out[i].Prev, out[i].Claimed, out[i].Err = s.claimReply(rec, replies[i])
		}
	}
	return out
}

// CompleteMany implements [idemstore.BatchStore]: each record's completion is the script
// of [Store.Complete] (conditional on its lease token; a resend of one that landed finds
// it completed under that token and writes nothing), and all of them go in one pipeline,
// one per node in cluster mode. A token that no longer owns its record yields
// idem.ErrLeaseLost for that record alone; a record over the size limit,
// [idemstore.ErrTooLarge] (it is not sent); a failed round trip, an error wrapping
// idem.ErrStore for each completion it carried.
func (s *Store) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	calls := make([]call, len(recs))
	for i, rec := range recs {
		calls[i] = s.completeCall(rec)
	}
	replies, errs := s.runMany(ctx, calls)
	out := make([]error, len(recs))
	for i := range recs {
		if calls[i].err != nil {
			out[i] = calls[i].err
			continue
		}
		out[i] = s.ownedReply("complete", replies[i], errs[i])
	}
	return out
}

// ReleaseMany implements [idemstore.BatchStore]: each key's release is the script of
// [Store.Release] (the record kept as a tombstone whose lease ended at now, conditional on
// the token), and all of them go in one pipeline, one per node in cluster mode. A token
// that does not own an in-progress record yields idem.ErrLeaseLost for that key alone; a
// failed round trip, an error wrapping idem.ErrStore for each release it carried.
func (s *Store) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	out := make([]error, len(keys))
	if len(tokens) != len(keys) {
		for i := range out {
			out[i] = errors.New("redisstore: release: keys and tokens differ in number")
		}
		return out
	}
	calls := make([]call, len(keys))
	for i := range keys {
		calls[i] = call{script: releaseScript, key: s.RedisKey(keys[i]), args: releaseArgs(tokens[i], now)}
	}
	replies, errs := s.runMany(ctx, calls)
	for i := range keys {
		out[i] = s.ownedReply("release", replies[i], errs[i])
	}
	return out
}

// runMany runs calls, each script on its key, in one pipeline, and returns each call's
// reply or error; a call that carries its own err is not sent. Scripts the server does
// not have yet (NOSCRIPT) go again with EVAL in a second pipeline: a refused EVALSHA ran
// nothing. Without a pipelining client, each call is a round trip of its own.
func (s *Store) runMany(ctx context.Context, calls []call) ([]any, []error) {
	replies, errs := make([]any, len(calls)), make([]error, len(calls))
	var send []int
	for i := range calls {
		if calls[i].err == nil {
			send = append(send, i)
		}
	}
	if len(send) == 0 {
		return replies, errs
	}
	p, ok := s.client.(pipeliner)
	if !ok {
		for _, i := range send {
			replies[i], errs[i] = s.run(ctx, calls[i].script, calls[i].key, calls[i].args)
		}
		return replies, errs
	}
	var cmds []*redis.Cmd
	err := s.await(ctx, func(ctx context.Context) error {
		// cmds is set only here: after ctx ended, this may still be running.
		sent := pipelined(ctx, p, calls, send, (*redis.Script).EvalSha)
		var again []int
		for j, cmd := range sent {
			if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
				again = append(again, j)
			}
		}
		if len(again) > 0 {
			idx := make([]int, len(again))
			for n, j := range again {
				idx[n] = send[j]
			}
			for n, cmd := range pipelined(ctx, p, calls, idx, (*redis.Script).Eval) {
				sent[again[n]] = cmd
			}
		}
		cmds = sent
		return nil
	})
	for j, i := range send {
		if err != nil {
			errs[i] = err
			continue
		}
		replies[i], errs[i] = cmds[j].Result()
	}
	return replies, errs
}

// pipelined sends the calls idx in one pipeline with send (EVALSHA or EVAL) and returns
// their commands, in the order of idx, each with its reply or error.
func pipelined(ctx context.Context, p pipeliner, calls []call, idx []int,
	send func(*redis.Script, context.Context, redis.Scripter, []string, ...any) *redis.Cmd,
) []*redis.Cmd {
	pipe := p.Pipeline()
	cmds := make([]*redis.Cmd, len(idx))
	for j, i := range idx {
		c := &calls[i]
		cmds[j] = send(c.script, ctx, pipe, []string{c.key}, c.args...)
	}
	// Exec's error is the first command's error; each command keeps its own.
	_, _ = pipe.Exec(ctx)
	return cmds
}
