package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/redisserver"
)

// Cluster is a local Redis Cluster of masters without replicas, one [Server] each.
type Cluster struct {
	// Nodes are the cluster's servers.
	Nodes []*Server
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Stop stops every node.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Stop())
	}
	return errors.Join(errs...)
}

// StartCluster starts masters servers in cluster mode on 127.0.0.1 and joins them with
// redis-cli --cluster create, spreading the 16384 slots over them. It returns once every
// node reports cluster_state:ok.
func StartCluster(ctx context.Context, masters int) (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-cli not found (Debian package redis-tools): %w", err)
	}
	c := &Cluster{}
	for range masters {
		n, err := Start(ctx, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			return nil, errors.Join(err, c.Stop())
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("redistest: redis-cli --cluster create: %w\n%s", err, out), c.Stop())
	}
	if err := c.waitOK(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// waitOK waits until every node reports cluster_state:ok.
func (c *Cluster) waitOK(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisserver.StartTimeout)
	defer cancel()
	for _, addr := range c.Addrs() {
		cl := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			select {
			case <-ctx.Done():
				_ = cl.Close()
				if err != nil {
					return fmt.Errorf("redistest: cluster node %s not ok: %w", addr, err)
				}
				return fmt.Errorf("redistest: cluster node %s not ok: %s", addr, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
		_ = cl.Close()
	}
	return nil
}

// StartCluster starts a local cluster of masters for tb and stops it when tb ends. It
// skips tb (or, with [EnvRequire] set, fails it) when it cannot.
func (e *Env) StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	c, err := StartCluster(context.Background(), masters)
	if err != nil {
		e.unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// StartServer starts a server of tb's own (see [Start]) and stops it when tb ends. It
// skips tb (or, with [EnvRequire] set, fails it) when it cannot.
func (e *Env) StartServer(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	s, err := Start(context.Background(), extra...)
	if err != nil {
		e.unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// unavailable fails tb with [EnvRequire] set, else skips it, for err.
func (e *Env) unavailable(tb testing.TB, err error) {
	tb.Helper()
	proctest.Unavailable(tb, EnvRequire, err)
}
