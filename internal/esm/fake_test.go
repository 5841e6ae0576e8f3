package esm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/idemkit/idem/internal/esm"
)

// fakeStream is an in-memory [esm.Source]: shards of records whose events carry only
// eventID and the sequence number, in the DynamoDB event's shape.
type fakeStream struct {
	mu     sync.Mutex
	shards []esm.Shard
	recs   map[string][]esm.Record
	closed map[string]bool
}

func newFakeStream() *fakeStream {
	return &fakeStream{recs: map[string][]esm.Record{}, closed: map[string]bool{}}
}

// add appends n records to shard (created with parent if new) and returns their
// sequence numbers; numbers are global, so shards never share one.
func (f *fakeStream) add(shard, parent string, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.recs[shard]; !ok {
		f.shards = append(f.shards, esm.Shard{ID: shard, ParentID: parent})
		f.recs[shard] = []esm.Record{}
	}
	total := 0
	for _, rs := range f.recs {
		total += len(rs)
	}
	var seqs []string
	for i := range n {
		seq := fmt.Sprintf("%021d", 100+total+i)
		ev, _ := json.Marshal(map[string]any{
			"eventID":   shard + "-" + seq,
			"eventName": "INSERT",
			"dynamodb":  map[string]any{"SequenceNumber": seq},
		})
		f.recs[shard] = append(f.recs[shard], esm.Record{SequenceNumber: seq, Event: ev})
		seqs = append(seqs, seq)
	}
	return seqs
}

func (f *fakeStream) close(shard string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed[shard] = true
}

func (f *fakeStream) Shards(context.Context) ([]esm.Shard, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]esm.Shard(nil), f.shards...), nil
}

func (f *fakeStream) Read(_ context.Context, shard, after string, limit int) ([]esm.Record, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []esm.Record
	rs := f.recs[shard]
	for _, r := range rs {
		if after != "" && !esm.SequenceLess(after, r.SequenceNumber) {
			continue
		}
		if len(out) == limit {
			return out, false, nil
		}
		out = append(out, r)
	}
	return out, f.closed[shard], nil
}
