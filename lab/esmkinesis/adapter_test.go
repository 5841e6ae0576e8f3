package esmkinesis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/esm"
	idemkinesis "github.com/idemkit/idem/kinesis"
	"github.com/idemkit/idem/lab/esmkinesis"
	"github.com/idemkit/idem/lab/kinesalite"
	"github.com/idemkit/idem/memstore"
)

// TestKinesisAdapterEndToEnd drains a two-shard stream on kinesalite through package
// kinesis's handler, as Lambda's event source mapping does (internal/esm), under a record
// failing once per partition key and a lost response: every record's effect happens
// exactly once, each partition key's in order, and the checkpoint never passes an
// unsettled record.
func TestKinesisAdapterEndToEnd(t *testing.T) {
	t.Parallel()
	client := kinesalite.Client(t)
	ctx := drainCtx(t)
	name := newStream(t, client, 2)
	for _, pk := range []string{"a", "c"} {
		put(t, client, name, 0, pk, 6)
	}
	put(t, client, name, 1, "b", 8)
	src, err := esmkinesis.Open(ctx, client, name)
	require.NoError(t, err)

	g, err := idem.New(memstore.New(), "kinesis-e2e")
	require.NoError(t, err)
	var eff effects
	var mu sync.Mutex
	failed := map[string]bool{}
	var order []string
	h, err := idemkinesis.New(g, func(_ context.Context, r events.KinesisEventRecord) error {
		data := string(r.Kinesis.Data)
		mu.Lock()
		fail := strings.HasSuffix(data, "/2") && !failed[data]
		failed[data] = failed[data] || fail
		if !fail {
			order = append(order, data)
		}
		mu.Unlock()
		if fail {
			return errors.New("fails once")
		}
		eff.apply(data)
		return nil
	})
	require.NoError(t, err)
	var lost atomic.Bool // the fault hook runs on each shard's goroutine
	p, err := esm.New(src, h.Handle, esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(),
		esm.WithBatchSize(5), esm.WithFault(func(b esm.Batch) esm.Fault {
			if b.Retry == 0 && lost.CompareAndSwap(false, true) {
				return esm.FaultLoseResponse
			}
			return esm.FaultNone
		}))
	require.NoError(t, err)
	r, err := p.Drain(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Check())

	want := map[string]int{}
	for pk, n := range map[string]int{"a": 6, "b": 8, "c": 6} {
		for i := range n {
			want[fmt.Sprintf("%s/%d", pk, i)] = 1
		}
	}
	assert.Equal(t, want, eff.snapshot(), "every record once")
	mu.Lock()
	defer mu.Unlock()
	last := map[string]int{}
	for _, data := range order {
		pk, i, _ := strings.Cut(data, "/")
		var n int
		_, _ = fmt.Sscan(i, &n)
		if prev, ok := last[pk]; ok {
			assert.Less(t, prev, n, "partition key %s in order", pk)
		}
		last[pk] = n
	}
}
