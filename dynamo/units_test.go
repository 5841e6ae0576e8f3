package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
)

// capacityAPI wraps a [dynamo.API], asks DynamoDB for the capacity every call consumes
// (ReturnConsumedCapacity TOTAL) and sums it, with the calls, until the next take.
//
// A conditional write that fails comes back as an error, which carries no consumed
// capacity: DynamoDB Local does not send it, and the API's error shapes have no field for
// it. For a failed conditional PutItem the write units are therefore computed from the item
// sizes, per AWS's documented rule: the larger of the proposed item and the existing one
// (which the failure returns), in units of 1 KB, at least 1. Any other failed write is
// counted in unpriced, which the tests require to be zero.
type capacityAPI struct {
	dynamo.API

	mu sync.Mutex
	u  usage
}

// usage is what the calls since the last take cost.
type usage struct {
	calls    map[string]int
	wcu, rcu float64
	// computedWCU is the part of wcu computed from item sizes (failed conditional puts).
	computedWCU float64
	// unpriced counts failed writes whose units are unknown.
	unpriced int
}

func (c *capacityAPI) take() usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.u
	c.u = usage{}
	if u.calls == nil {
		u.calls = map[string]int{}
	}
	return u
}

// add records one call of op and the units it consumed.
func (c *capacityAPI) add(op string, write bool, ccs ...types.ConsumedCapacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.u.calls == nil {
		c.u.calls = map[string]int{}
	}
	c.u.calls[op]++
	for _, cc := range ccs {
		units := 0.0
		if cc.CapacityUnits != nil {
			units = *cc.CapacityUnits
		}
		if write {
			c.u.wcu += units
		} else {
			c.u.rcu += units
		}
	}
}

func (c *capacityAPI) failed(op string, computedWCU float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.u.calls == nil {
		c.u.calls = map[string]int{}
	}
	c.u.calls[op]++
	if computedWCU < 0 {
		c.u.unpriced++
		return
	}
	c.u.wcu += computedWCU
	c.u.computedWCU += computedWCU
}

func one(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}

// writeUnits is what a write of an item of size bytes costs: 1 unit per KB, rounded up.
func writeUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// readUnits is what a strongly consistent read of an item of size bytes costs: 1 unit per
// 4 KB, rounded up.
func readUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/4096)) }

func (c *capacityAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.API.PutItem(ctx, &cp, optFns...)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		c.failed("PutItem", writeUnits(max(dynamo.ItemSize(in.Item), dynamo.ItemSize(ccf.Item))))
	case err != nil:
		c.failed("PutItem", -1)
	default:
		c.add("PutItem", true, one(out.ConsumedCapacity)...)
	}
	return out, err
}

func (c *capacityAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.API.GetItem(ctx, &cp, optFns...)
	if err != nil {
		c.failed("GetItem", -1)
		return out, err
	}
	c.add("GetItem", false, one(out.ConsumedCapacity)...)
	return out, err
}

func (c *capacityAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.API.UpdateItem(ctx, &cp, optFns...)
	if err != nil {
		c.failed("UpdateItem", -1)
		return out, err
	}
	c.add("UpdateItem", true, one(out.ConsumedCapacity)...)
	return out, err
}

func (c *capacityAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.API.DeleteItem(ctx, &cp, optFns...)
	if err != nil {
		c.failed("DeleteItem", -1)
		return out, err
	}
	c.add("DeleteItem", true, one(out.ConsumedCapacity)...)
	return out, err
}

func (c *capacityAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.API.TransactWriteItems(ctx, &cp, optFns...)
	if err != nil {
		c.failed("TransactWriteItems", -1)
		return out, err
	}
	c.add("TransactWriteItems", true, out.ConsumedCapacity...)
	return out, err
}

func (c *capacityAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	cp := *in
	cp.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.API.BatchGetItem(ctx, &cp, optFns...)
	if err != nil {
		c.failed("BatchGetItem", -1)
		return out, err
	}
	c.add("BatchGetItem", false, out.ConsumedCapacity...)
	return out, err
}

// orderLine is one line of the results the cost tests store: varied SKUs, quantities,
// prices and warehouses, so that a result compresses like real data (about 5 to 1) rather
// than like one repeated line.
type orderLine struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int    `json:"price_cents"`
	Warehouse  string `json:"warehouse"`
}

// orderLines returns a result whose JSON is size bytes or a little more.
func orderLines(size int) []orderLine {
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []orderLine
	for n := 2; n < size; {
		l := orderLine{
			SKU:        fmt.Sprintf("SKU-%06d", rng.IntN(1_000_000)),
			Quantity:   1 + rng.IntN(20),
			PriceCents: 99 + rng.IntN(100_000),
			Warehouse:  []string{"IAD", "PDX", "DUB", "FRA", "NRT"}[rng.IntN(5)],
		}
		b, _ := json.Marshal(l)
		n += len(b) + 1
		lines = append(lines, l)
	}
	return lines
}

// pathCost is what one guarded invocation cost.
type pathCost struct {
	calls    map[string]int
	wcu, rcu float64
	computed float64
}

func (p pathCost) String() string {
	ops := make([]string, 0, len(p.calls))
	for _, op := range []string{"PutItem", "GetItem", "UpdateItem", "TransactWriteItems", "DeleteItem", "BatchGetItem"} {
		if n := p.calls[op]; n > 0 {
			ops = append(ops, fmt.Sprintf("%s %d", op, n))
		}
	}
	return strings.Join(ops, " + ")
}

func roundTrips(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

// TestWriteUnits measures, on DynamoDB Local, the capacity units of the three paths of a
// guarded invocation (new key, replay, in flight elsewhere) for results of 100 B, 4 KB,
// 50 KB and 300 KB of JSON, compressed as the guard does by default, and of 4 KB and 300 KB
// stored uncompressed, and prints them as a table (go test -v -run TestWriteUnits
// ./dynamo). It holds the budget: a replay costs at most one write unit plus what reading
// the stored result costs, whatever its size; a result whose record stays under 1 KB
// replays in one round trip and is stored in two; an in-flight duplicate costs one round
// trip and one write unit.
func TestWriteUnits(t *testing.T) {
	t.Parallel()
	client := ddblocal.Client(t)
	api := &capacityAPI{API: client}
	store, err := dynamo.New(api, ddblocal.NewTable(t, client))
	require.NoError(t, err)
	ctx := context.Background()

	cases := []struct {
		name     string
		size     int
		compress bool
		small    bool // the whole record stays under 1 KB
	}{
		{"100 B", 100, true, true},
		{"4 KB", 4 << 10, true, false},
		{"4 KB uncompressed", 4 << 10, false, false},
		{"50 KB", 50 << 10, true, false},
		{"300 KB", 300 << 10, true, false},
		{"300 KB uncompressed", 300 << 10, false, false},
	}
	var table strings.Builder
	table.WriteString("| result | JSON bytes | stored bytes | path | calls | WCU | RCU |\n| --- | ---: | ---: | --- | --- | ---: | ---: |\n")
	for _, tc := range cases {
		threshold := idem.DefaultCompressionThreshold
		if !tc.compress {
			threshold = math.MaxInt32
		}
		scope := strings.NewReplacer(" ", "-").Replace(tc.name)
		g, err := idem.New(store, "units", idem.WithScope(scope), idem.WithCompression(threshold))
		require.NoError(t, err)
		result := orderLines(tc.size)
		raw, err := json.Marshal(result)
		require.NoError(t, err)
		fn := func(context.Context) ([]orderLine, error) { return result, nil }

		measure := func(path, key string, wantErr error) pathCost {
			t.Helper()
			api.take()
			got, replayed, err := idem.Do(ctx, g, idem.Request{Key: key}, fn)
			u := api.take()
			if wantErr != nil {
				require.ErrorIs(t, err, wantErr, "%s %s", tc.name, path)
			} else {
				require.NoError(t, err, "%s %s", tc.name, path)
				assert.Equal(t, path == "replay", replayed, "%s %s", tc.name, path)
				assert.Equal(t, result, got, "%s %s: the result, byte for byte", tc.name, path)
			}
			assert.Zero(t, u.unpriced, "%s %s: every call priced", tc.name, path)
			return pathCost{calls: u.calls, wcu: u.wcu, rcu: u.rcu, computed: u.computedWCU}
		}

		newKey := measure("new key", "k", nil)
		stored, err := store.Get(ctx, mustStoredKey(t, g, "k"))
		require.NoError(t, err)
		require.NotNil(t, stored)
		replay := measure("replay", "k", nil)

		hold, started, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(finished)
			_, _, _ = idem.Do(ctx, g, idem.Request{Key: "held"}, func(context.Context) ([]orderLine, error) {
				close(started)
				<-hold
				return result, nil
			})
		}()
		<-started
		inFlight := measure("in flight", "held", idem.ErrInProgress)
		close(hold)
		<-finished

		for _, r := range []struct {
			path string
			c    pathCost
		}{{"new key", newKey}, {"replay", replay}, {"in flight", inFlight}} {
			wcu := fmt.Sprintf("%g", r.c.wcu)
			if r.c.computed > 0 {
				wcu += "*"
			}
			fmt.Fprintf(&table, "| %s | %d | %d | %s | %s | %s | %g |\n", tc.name, len(raw), len(stored.Data), r.path, r.c, wcu, r.c.rcu)
		}

		// The budget.
		assert.LessOrEqual(t, replay.wcu, 1.0, "%s: a replay costs at most one write unit", tc.name)
		assert.LessOrEqual(t, replay.rcu, readUnits(len(stored.Data)+1024), "%s: and at most what reading the stored result costs", tc.name)
		assert.Equal(t, map[string]int{"PutItem": 1}, inFlight.calls, "%s: in flight", tc.name)
		assert.Equal(t, 1.0, inFlight.wcu, "%s: in flight", tc.name)
		if tc.small {
			assert.Equal(t, map[string]int{"PutItem": 1, "UpdateItem": 1}, newKey.calls, "%s: new key", tc.name)
			assert.Equal(t, map[string]int{"PutItem": 1}, replay.calls, "%s: replay", tc.name)
		} else {
			assert.LessOrEqual(t, roundTrips(replay.calls), 2, "%s: replay", tc.name)
			assert.LessOrEqual(t, roundTrips(newKey.calls), 3, "%s: new key", tc.name)
		}
		assert.Equal(t, idemstore.StatusCompleted, stored.Status)
	}
	t.Logf("capacity units per invocation on DynamoDB Local (* = a failed conditional write, priced from item sizes):\n%s", table.String())
}
