package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/idemstore"
)

func TestLRU(t *testing.T) {
	t.Parallel()
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(key string, status idemstore.Status) *idemstore.Record {
		return &idemstore.Record{Key: key, Status: status, Expires: now.Add(time.Hour)}
	}
	t.Run("EvictsTheLeastRecentlyUsed", func(t *testing.T) {
		t.Parallel()
		c := newLRU(2)
		c.put(rec("a", idemstore.StatusCompleted))
		c.put(rec("b", idemstore.StatusCompleted))
		assert.NotNil(t, c.get("a", now), "a is now the most recent")
		c.put(rec("c", idemstore.StatusFailed))
		assert.Nil(t, c.get("b", now), "b was the least recently used")
		assert.NotNil(t, c.get("a", now))
		assert.NotNil(t, c.get("c", now))
	})
	t.Run("ExpiredRecordsMiss", func(t *testing.T) {
		t.Parallel()
		c := newLRU(2)
		c.put(rec("a", idemstore.StatusCompleted))
		assert.Nil(t, c.get("a", now.Add(time.Hour)), "at Expires the record no longer counts")
		assert.Nil(t, c.get("a", now), "and it was dropped")
	})
	t.Run("OnlyFinishedRecords", func(t *testing.T) {
		t.Parallel()
		c := newLRU(2)
		c.put(rec("a", idemstore.StatusInProgress))
		assert.Nil(t, c.get("a", now), "an in-progress record is never cached")
	})
	t.Run("NilCacheHoldsNothing", func(t *testing.T) {
		t.Parallel()
		var c *lru
		c.put(rec("a", idemstore.StatusCompleted))
		assert.Nil(t, c.get("a", now))
	})
	t.Run("PutReplaces", func(t *testing.T) {
		t.Parallel()
		c := newLRU(1)
		c.put(rec("a", idemstore.StatusCompleted))
		r := rec("a", idemstore.StatusFailed)
		c.put(r)
		assert.Same(t, r, c.get("a", now))
	})
}
