package batch_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/memstore"
)

// record is one record of a made-up source, ordered within its partition.
type record struct {
	ID, Partition string
	Data          []byte
}

// An adapter for a new source: records become items, the engine runs them, and the first
// failure of each partition is reported.
func Example() {
	guard, _ := idem.New(memstore.New(), "consume")
	engine, _ := batch.New(guard, batch.Source{Name: "mysource"})
	keyOf := func(r record) (string, error) { return r.ID, nil }
	handle := func(_ context.Context, r record) error {
		if string(r.Data) == "bad" {
			return errors.New("cannot apply")
		}
		return nil
	}
	records := []record{
		{ID: "1", Partition: "p1", Data: []byte("ok")},
		{ID: "2", Partition: "p1", Data: []byte("bad")},
		{ID: "3", Partition: "p1", Data: []byte("ok")}, // not started
		{ID: "4", Partition: "p2", Data: []byte("ok")},
	}
	ctx := context.Background()

	items := make([]batch.Item, len(records))
	for i, r := range records {
		key, err := keyOf(r) // an error fails the record with ReasonKey
		items[i] = batch.Item{ID: r.ID, Group: r.Partition, Key: key, Fingerprint: r.Data, Err: err}
	}
	run := func(ctx context.Context, i int) error { return handle(ctx, records[i]) }
	rep := engine.Process(ctx, items, run, batch.Mode{Ordered: true, RecordBeforeNext: true})
	for _, i := range rep.FirstFailures() {
		fmt.Println("report", records[i].ID)
	}
	fmt.Println(rep.Ran, rep.Outcomes[2].Reason)
	// Output:
	// report 2
	// 2 group_stopped
}
