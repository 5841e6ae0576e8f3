package rabbitconsumer

import (
	"sync"
	"time"
)

// The bounds of the counts a consumer keeps, per key, of the runs that committed nothing
// of a message it returned to the queue (see [uncommittedCounts]).
const (
	// maxUncommittedKeys is how many keys the consumer keeps a count for at most. A new key
	// beyond it drops the count kept longest without a change.
	maxUncommittedKeys = 10_000
	// uncommittedMemory is how long a key's count is kept after its last run that committed
	// nothing: far beyond the requeue delay after which its message comes back.
	uncommittedMemory = 10 * time.Minute
)

// uncommittedCounts keeps, per key, the count of runs that committed nothing of a delivery
// the consumer returned to the queue rather than held (one with a per-message TTL), so that
// its redelivery goes on counting toward [WithNotCommittedRetries] instead of starting at 0:
// under [DeadLetter] the message is then dead-lettered after n+1 runs, as a held one is,
// rather than run again at every requeue delay until its TTL. A key's count is dropped once
// a delivery of it settles otherwise (acknowledged, dead-lettered, or handed to the failure
// policy), after [uncommittedMemory] without a change, or when [maxUncommittedKeys] newer
// keys push it out. The counts are the consumer's own: a redelivery to another consumer
// counts from 0 there. It is safe for concurrent use.
type uncommittedCounts struct {
	mu   sync.Mutex
	keys map[string]uncommittedCount
}

type uncommittedCount struct {
	n  int
	at time.Time // the last change
}

// get returns key's count at now, 0 if none is kept.
func (u *uncommittedCounts) get(key string, now time.Time) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.keys[key]
	if !ok || now.Sub(c.at) >= uncommittedMemory {
		return 0
	}
	return c.n
}

// put sets key's count to n at now.
func (u *uncommittedCounts) put(key string, n int, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.keys == nil {
		u.keys = make(map[string]uncommittedCount)
	}
	if _, ok := u.keys[key]; !ok && len(u.keys) >= maxUncommittedKeys {
		u.evict(now)
	}
	u.keys[key] = uncommittedCount{n: n, at: now}
}

// drop forgets key's count.
func (u *uncommittedCounts) drop(key string) {
	u.mu.Lock()
	delete(u.keys, key)
	u.mu.Unlock()
}

// evict makes room for one key: it drops the counts older than uncommittedMemory, or if
// none is, the oldest. u.mu is held.
func (u *uncommittedCounts) evict(now time.Time) {
	var oldest string
	var at time.Time
	for k, c := range u.keys {
		if now.Sub(c.at) >= uncommittedMemory {
			delete(u.keys, k)
			continue
		}
		if oldest == "" || c.at.Before(at) {
			oldest, at = k, c.at
		}
	}
	if len(u.keys) >= maxUncommittedKeys {
		delete(u.keys, oldest)
	}
}

// len returns how many keys have a count kept, expired ones included.
func (u *uncommittedCounts) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.keys)
}
