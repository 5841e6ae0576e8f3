package ddbrelay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview18_RunInterleavedWithAnotherRun: two completions of two stored keys record
// events under one ordering key at about the same time: run a-1 (events a-1, a-2, recorded
// in that order, one transaction) and run a-9 (event a-9, its own transaction). DynamoDB
// Streams orders the changes of one item, not those of different items (the reason the
// relay sorts a run by position at all), so the shard may hold a-2, a-9, a-1: run a-1's
// records are not consecutive. The relay sorts only consecutive records of one run, so it
// publishes a-2 before a-1, against the order of their outbox.Record calls that the
// package promises for a run's events held by one batch.
//
// Schedule: the batch holds 1: a-2 (run a-1, position 1), 2: a-9 (run a-9, position 0),
// 3: a-1 (run a-1, position 0); inRunOrder sees three runs of one record each and keeps
// the stream's order; the publisher gets a-2, a-9, a-1. Severity: medium (one run's events
// leave out of order, silently; downstream consumers see "second" before "first").
//
// Fails on main: key a is published a-2, a-9, a-1.
func TestReview18_RunInterleavedWithAnotherRun(t *testing.T) {
	t.Parallel()
	pub := &recorder{}
	r := newRelay(t, pub)
	resp, err := r.Handle(context.Background(), eventOf(
		insertRun("1", "a", "a-2", "s1", "a-1", 1),
		insertRun("2", "a", "a-9", "s2", "a-9", 0),
		insertRun("3", "a", "a-1", "s1", "a-1", 0),
	))
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	got := perKey(pub.took())["a"]
	require.Len(t, got, 3)
	pos := map[string]int{}
	for i, id := range got {
		pos[id] = i
	}
	assert.Less(t, pos["a-1"], pos["a-2"], "run a-1's events leave in the order they were recorded: got %v", got)
}
