package main

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/redisserver"
	"github.com/idemkit/idem/lab/bench"
	"github.com/idemkit/idem/redisstore"
)

// openRedis starts redis-server unless o names one (a redis:// URL), and builds one client
// with a pool of W3's size, counted by a hook, and the store under a fresh key prefix. Its
// workloads are W1–W4b and the raw floor X1, X2 (see redisfloor.go).
func openRedis(ctx context.Context, o options) (t *target, err error) {
	m := &bench.Meter{Commands: true}
	var server *redisserver.Server
	var client *redis.Client
	t = &target{meter: m, sqs: true, close: func() error {
		var errs []error
		if client != nil {
			errs = append(errs, client.Close())
		}
		if server != nil {
			errs = append(errs, server.Stop())
		}
		return errors.Join(errs...)
	}}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.close())
		}
	}()
	opts := &redis.Options{}
	if o.url != "" {
		if opts, err = redis.ParseURL(o.url); err != nil {
			return nil, err
		}
	} else {
		if server, err = redisserver.Start(ctx); err != nil {
			return nil, err
		}
		opts.Addr, m.ServerPID = server.Addr, server.PID()
	}
	opts.PoolSize = max(opts.PoolSize, bench.W3Goroutines)
	client = redis.NewClient(opts)
	client.AddHook(commands{m})
	prefix := "idem-bench:" + bench.Token()[:8] + ":"
	if t.store, err = redisstore.New(client, redisstore.WithKeyPrefix(prefix)); err != nil {
		return nil, err
	}
	t.extra = func(b *bench.Bench) []bench.Step {
		x := &redisFloor{b: b, client: client, prefix: prefix, keys: newRawKeys(b.Guard, b.Counts().Invocations)}
		y := &redisFloor{b: b, client: client, prefix: prefix, keys: newRawKeys(b.Guard, b.Counts().Invocations)}
		return append([]bench.Step{x.setComplete, x.setConflict}, pairSteps(b, y.newKey, y.replay)...)
	}
	return t, nil
}

// commands counts what the client sends: each command sent alone is a call, named for
// the command (EVALSHA for every state change), and each pipeline one call, "pipeline";
// the meter counts the commands apart (a pipeline's each).
type commands struct{ m *bench.Meter }

func (commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.m.Call(strings.ToLower(cmd.Name()), 0)
		c.m.Command(1)
		return next(ctx, cmd)
	}
}

func (c commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.m.Call("pipeline", 0)
		c.m.Command(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
