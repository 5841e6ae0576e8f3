package rabbitconsumer

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestUncommittedCountsAreBounded: the counts kept for the redeliveries of messages whose
// runs committed nothing are bounded in number (the oldest dropped) and in time, and a
// key's count is dropped when it settles.
func TestUncommittedCountsAreBounded(t *testing.T) {
	t.Parallel()
	var u uncommittedCounts
	start := time.Unix(1_000_000, 0)
	u.put("k", 2, start)
	assert.Equal(t, 2, u.get("k", start.Add(uncommittedMemory-time.Second)))
	assert.Zero(t, u.get("k", start.Add(uncommittedMemory)), "forgotten after uncommittedMemory")
	u.drop("k")
	assert.Zero(t, u.get("k", start))

	for i := range maxUncommittedKeys + 1 {
		u.put(strconv.Itoa(i), 1, start.Add(time.Duration(i)*time.Millisecond))
	}
	assert.Equal(t, maxUncommittedKeys, u.len(), "at most maxUncommittedKeys")
	now := start.Add(time.Hour / 2 / 60) // 30 s later
	assert.Zero(t, u.get("0", now), "the oldest dropped")
	assert.Equal(t, 1, u.get("1", now))
	assert.Equal(t, 1, u.get(strconv.Itoa(maxUncommittedKeys), now))

	u.put("1", 3, now)
	assert.Equal(t, maxUncommittedKeys, u.len(), "a key kept already takes no room")
	u.put("new", 1, start.Add(uncommittedMemory+time.Hour))
	assert.Equal(t, 1, u.len(), "a new key beyond the bound first drops the expired counts")
}
