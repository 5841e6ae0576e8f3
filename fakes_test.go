package idem_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// The test doubles and helpers that several of the package's test files share: stores
// written by hand over a memstore.Store, and contexts on a simulated clock.

// counting counts store round trips per operation.
type counting struct {
	idemstore.Store
	mu    sync.Mutex
	calls map[string]int
}

func newCounting(s idemstore.Store) *counting { return &counting{Store: s, calls: map[string]int{}} }

func (c *counting) inc(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *counting) reset() {
	c.mu.Lock()
	c.calls = map[string]int{}
	c.mu.Unlock()
}

func (c *counting) Claim(ctx context.Context, r *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	c.inc("claim")
	return c.Store.Claim(ctx, r, now)
}

func (c *counting) Get(ctx context.Context, k string) (*idemstore.Record, error) {
	c.inc("get")
	return c.Store.Get(ctx, k)
}

func (c *counting) Complete(ctx context.Context, r *idemstore.Record, a []any) error {
	c.inc("complete")
	return c.Store.Complete(ctx, r, a)
}

func (c *counting) Release(ctx context.Context, k, t string, now time.Time) error {
	c.inc("release")
	return c.Store.Release(ctx, k, t, now)
}

func (c *counting) SetCheckpoint(ctx context.Context, k, t, cp string, seq int64) error {
	c.inc("checkpoint")
	return c.Store.SetCheckpoint(ctx, k, t, cp, seq)
}

// counts returns the calls by operation.
func (c *counting) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// countingBatch counts round trips of a BatchStore.
type countingBatch struct {
	*counting
	bs *memstore.Store
}

func newCountingBatch() *countingBatch {
	m := memstore.New()
	return &countingBatch{counting: newCounting(m), bs: m}
}

func (c *countingBatch) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	c.inc("claimMany")
	return c.bs.ClaimMany(ctx, recs, now)
}

func (c *countingBatch) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	c.inc("completeMany")
	return c.bs.CompleteMany(ctx, recs)
}

func (c *countingBatch) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	c.inc("releaseMany")
	return c.bs.ReleaseMany(ctx, keys, tokens, now)
}

func reqs(prefix string, n int) []idem.Request {
	out := make([]idem.Request, n)
	for i := range out {
		out[i] = idem.Request{Key: prefix + strconv.Itoa(i)}
	}
	return out
}

var errThrottled = errors.New("throttled")

// extendStore is an in-memory store whose lease extensions succeed okBeats times and then
// fail with a store error, as a throttled or unreachable DynamoDB would. It reports the
// outcome of every extension on calls.
type extendStore struct {
	*memstore.Store
	okBeats int
	calls   chan error

	mu sync.Mutex
	n  int
}

func newExtendStore(okBeats int) *extendStore {
	return &extendStore{Store: memstore.New(), okBeats: okBeats, calls: make(chan error, 1000)}
}

func (s *extendStore) Extend(ctx context.Context, key, token string, end time.Time) error {
	s.mu.Lock()
	s.n++
	fail := s.n > s.okBeats
	s.mu.Unlock()
	err := errThrottled
	if !fail {
		err = s.Store.Extend(ctx, key, token, end)
	}
	s.calls <- err
	return err
}

// errConnReset is a store failure that does not come from the caller's context.
var errConnReset = fmt.Errorf("%w: connection reset", idem.ErrStore)

// deadlineIn returns a context whose deadline is d from now on clock, or, for a d of zero,
// one without a deadline. A simulated clock runs far ahead of the wall clock, so only the
// clock ever reaches such a deadline; the guard compares deadlines with its clock's time.
func deadlineIn(t *testing.T, clock idem.Clock, d time.Duration) context.Context {
	t.Helper()
	if d == 0 {
		return context.Background()
	}
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(d))
	t.Cleanup(cancel)
	return ctx
}
