package idem

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/idemkit/idem/idemstore"
)

// lru is a bounded cache of completed records, keyed by stored key. A nil *lru is a cache
// that holds nothing, so callers need not check whether caching is on.
type lru struct {
	mu    sync.Mutex
	size  int
	order *list.List // front = most recently used; values are *Record
	items map[string]*list.Element
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), items: make(map[string]*list.Element, size)}
}

// get returns the cached record for key unless it has expired at now.
func (c *lru) get(key string, now time.Time) *idemstore.Record {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil
	}
	rec := e.Value.(*idemstore.Record)
	if rec.Expired(now) {
		c.order.Remove(e)
		delete(c.items, key)
		return nil
	}
	c.order.MoveToFront(e)
	return rec
}

// put caches a completed or failed record, evicting the least recently used.
func (c *lru) put(rec *idemstore.Record) {
	if c == nil || (rec.Status != idemstore.StatusCompleted && rec.Status != idemstore.StatusFailed) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[rec.Key]; ok {
		e.Value = rec
		c.order.MoveToFront(e)
		return
	}
	c.items[rec.Key] = c.order.PushFront(rec)
	if c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*idemstore.Record).Key)
	}
}

// replayCached answers a caller whose key the local cache holds in rec, at now: rec to
// replay, or [ErrPayloadMismatch]. It is [Guard.conflict] for the only records the cache
// holds, completed or failed ones, and its [Hooks.OnReplayed] says the replay came from
// the cache.
func (g *Guard) replayCached(ctx context.Context, rec *idemstore.Record, fp string, now time.Time) (*idemstore.Record, error) {
	if err := g.checkFingerprint(ctx, rec, fp); err != nil {
		return nil, err
	}
	g.fire(ctx, g.cfg.hooks.OnReplayed, now, Event{Key: rec.Key, FromCache: true})
	return rec, nil
}
