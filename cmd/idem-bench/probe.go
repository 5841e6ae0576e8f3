package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
)

// The write cost probe (-probe) measures what one write request costs DynamoDB Local, per
// call and per item, for each way the library writes records (and two it does not use),
// to tell whether the server's CPU per conditional item write bounds the latency of an
// SQS batch (W4): if a PartiQL statement costs the server as much CPU as the single-item
// request it stands for, batching saves round trips but not server time.

// ProbeCounts are the sizes of the write cost probe: rounds of every request shape, and
// the items per multi-item call.
type ProbeCounts struct {
	WarmupRounds int // unmeasured, for the JVM's JIT: about 8 requests each
	Rounds       int
	BatchSize    int
}

// SpecProbeCounts returns the probe sizes `idem-bench -probe` runs with: about 9,600
// warmup requests (50,000 items), then 600 measured calls of each shape, in about 3 minutes
// on the machine of BENCHMARKS.md.
func SpecProbeCounts() ProbeCounts {
	return ProbeCounts{WarmupRounds: 1200, Rounds: 600, BatchSize: 10}
}

// ProbeResult is one JSON line of the probe: the cost of one request shape over its
// measured calls. CPU times are sums of the deltas around each call, divided by the calls
// (and for the server, also by the items): the server's from /proc/<pid>/stat, in 10 ms
// ticks, so only their sum over many calls means anything.
type ProbeResult struct {
	Name               string  `json:"name"`
	Calls              int     `json:"calls"`
	ItemsPerCall       int     `json:"items_per_call"`
	WallP50US          float64 `json:"wall_p50_us"`
	ServerCPUUSPerCall float64 `json:"server_cpu_us_per_call"`
	ServerCPUUSPerItem float64 `json:"server_cpu_us_per_item"`
	ClientCPUUSPerCall float64 `json:"client_cpu_us_per_call"`
	Note               string  `json:"note,omitempty"`
}

// ProbeSummary is the probe's last JSON line: one 10-record SQS batch's records as the
// per-message path writes them (a claim PutItem and a completion UpdateItem each) against
// the batched path (one PartiQL INSERT and one UPDATE each, 10 to a call), per record. The
// wall times are sums of the p50s, as if the calls ran one after another.
type ProbeSummary struct {
	Name                           string  `json:"name"`
	BatchSize                      int     `json:"batch_size"`
	PerMessageServerCPUUSPerRecord float64 `json:"per_message_server_cpu_us_per_record"`
	BatchedServerCPUUSPerRecord    float64 `json:"batched_server_cpu_us_per_record"`
	BatchedVsPerMessageServerCPU   float64 `json:"batched_vs_per_message_server_cpu"`
	PerMessageWallUSPerRecord      float64 `json:"per_message_wall_us_per_record"`
	BatchedWallUSPerRecord         float64 `json:"batched_wall_us_per_record"`
}

// probeShape is one request shape: prepare makes, untimed, what one call needs (fresh keys,
// and their claims for the completions) and returns the call to time.
type probeShape struct {
	name    string
	items   int
	note    string
	prepare func(ctx context.Context) (func(ctx context.Context) error, error)

	lat            []time.Duration
	server, client float64 // ms, summed over the measured calls
}

// probe holds the shapes and what they write with.
type probe struct {
	b      *bench
	store  *dynamo.Store
	n      int // items per multi-item call
	shapes []*probeShape
}

// runProbe runs the write cost probe instead of the workloads, printing a line per shape
// and the summary; it returns 1 when setup or a request fails.
func runProbe(ctx context.Context, opts setup, counts ProbeCounts, stdout, stderr io.Writer) int {
	if opts.own {
		rounds := counts.WarmupRounds + counts.Rounds
		n := counts.BatchSize
		fmt.Fprintf(stderr, "idem-bench: WARNING: using table %q on %s: the probe writes about %d items with "+
			"about %d item writes (%d of them transactional, billed twice); on AWS they are billed at your "+
			"table's prices, and the items stay until TTL deletes them (an hour after the run at the earliest)\n",
			opts.table, opts.where(), rounds*(2+4*n), rounds*(3+5*n), rounds*n)
	}
	env, err := opts.open(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer env.close(stderr)
	store, err := dynamo.New(env.client, opts.table)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	b := &bench{client: env.client, table: opts.table, guard: env.guard, cnt: env.cnt, pid: env.pid}
	p := newProbe(b, store, counts.BatchSize)
	results, summary, err := p.run(ctx, counts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if err := enc.Encode(summary); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func newProbe(b *bench, store *dynamo.Store, n int) *probe {
	p := &probe{b: b, store: store, n: n}
	// The first four are those of the summary, in this order; the multi-item names end in
	// n (10 in the specified run).
	p.shapes = []*probeShape{
		{name: "put_item", items: 1, prepare: p.putItem},
		{name: "update_item", items: 1, prepare: p.updateItem},
		{name: fmt.Sprint("partiql_insert_", n), items: n, prepare: p.partiQLInsert},
		{name: fmt.Sprint("partiql_update_", n), items: n, prepare: p.partiQLUpdate},
		{name: fmt.Sprint("transact_put_", n), items: n, prepare: p.transactPut},
		{name: fmt.Sprint("batch_write_", n), items: n, prepare: p.batchWrite,
			note: "reference only: unconditional puts, not usable for claims"},
	}
	return p
}

// run makes the warmup rounds, then the measured ones, and returns the results.
func (p *probe) run(ctx context.Context, counts ProbeCounts) ([]*ProbeResult, *ProbeSummary, error) {
	for r := range counts.WarmupRounds {
		if err := p.round(ctx, r, false); err != nil {
			return nil, nil, fmt.Errorf("idem-bench: probe warmup: %w", err)
		}
	}
	for _, sh := range p.shapes {
		sh.lat = make([]time.Duration, 0, counts.Rounds)
	}
	runtime.GC()
	for r := range counts.Rounds {
		if err := p.round(ctx, r, true); err != nil {
			return nil, nil, fmt.Errorf("idem-bench: probe: %w", err)
		}
	}
	results := make([]*ProbeResult, len(p.shapes))
	for i, sh := range p.shapes {
		results[i] = sh.result()
	}
	n := float64(p.n)
	put, upd, ins, pupd := results[0], results[1], results[2], results[3]
	s := &ProbeSummary{
		Name:                           "probe_summary",
		BatchSize:                      p.n,
		PerMessageServerCPUUSPerRecord: round(put.ServerCPUUSPerCall+upd.ServerCPUUSPerCall, 1),
		BatchedServerCPUUSPerRecord:    round((ins.ServerCPUUSPerCall+pupd.ServerCPUUSPerCall)/n, 1),
		PerMessageWallUSPerRecord:      round(put.WallP50US+upd.WallP50US, 1),
		BatchedWallUSPerRecord:         round((ins.WallP50US+pupd.WallP50US)/n, 1),
	}
	if s.PerMessageServerCPUUSPerRecord > 0 {
		s.BatchedVsPerMessageServerCPU = round(s.BatchedServerCPUUSPerRecord/s.PerMessageServerCPUUSPerRecord, 3)
	}
	return results, s, nil
}

// round prepares one call of every shape, then makes the calls one after another, starting
// at a different shape each round so that neither the order nor the machine's drift
// favours one; measure says whether the calls count.
func (p *probe) round(ctx context.Context, r int, measure bool) error {
	ctx, cancel := context.WithTimeout(ctx, deadline) // the claims' lease, as in Lambda
	defer cancel()
	calls := make([]func(context.Context) error, len(p.shapes))
	for i, sh := range p.shapes {
		call, err := sh.prepare(ctx)
		if err != nil {
			return fmt.Errorf("%s: prepare: %w", sh.name, err)
		}
		calls[i] = call
	}
	for j := range p.shapes {
		i := (r + j) % len(p.shapes)
		sh := p.shapes[i]
		// The server's CPU is read outermost and the client's innermost, so that neither
		// counts the reading of the other.
		s0 := processCPU(p.b.pid)
		c0 := selfCPU()
		t0 := time.Now()
		err := calls[i](ctx)
		d := time.Since(t0)
		c1 := selfCPU()
		s1 := processCPU(p.b.pid)
		if err != nil {
			return fmt.Errorf("%s: %w", sh.name, err)
		}
		if measure {
			sh.lat = append(sh.lat, d)
			sh.client += c1.sub(c0).total
			sh.server += s1.sub(s0).total
		}
	}
	return nil
}

func (sh *probeShape) result() *ProbeResult {
	n := len(sh.lat)
	r := &ProbeResult{Name: sh.name, Calls: n, ItemsPerCall: sh.items, Note: sh.note}
	if n == 0 {
		return r
	}
	sorted := slices.Clone(sh.lat)
	slices.Sort(sorted)
	r.WallP50US = us(percentile(sorted, 50))
	perCall := sh.server * 1e3 / float64(n)
	r.ServerCPUUSPerCall = round(perCall, 1)
	r.ServerCPUUSPerItem = round(perCall/float64(sh.items), 1)
	r.ClientCPUUSPerCall = round(sh.client*1e3/float64(n), 1)
	return r
}

// claimRecords returns n fresh records as the guard claims them (see claimInput), with
// their keys.
func (p *probe) claimRecords(ctx context.Context, n int) ([]*idemstore.Record, []rawKey) {
	now := time.Now()
	lease, _ := ctx.Deadline()
	recs := make([]*idemstore.Record, n)
	keys := make([]rawKey, n)
	for i := range recs {
		keys[i] = p.b.newRawKey()
		recs[i] = &idemstore.Record{
			Key:          keys[i].key,
			Status:       idemstore.StatusInProgress,
			Expires:      now.Add(expiry),
			LeaseExpires: lease,
			LeaseToken:   token(),
			Version:      idemstore.SchemaVersion,
		}
	}
	return recs, keys
}

// putItem is the claim's conditional PutItem of a fresh key.
func (p *probe) putItem(context.Context) (func(context.Context) error, error) {
	k := p.b.newRawKey()
	return func(ctx context.Context) error {
		_, err := p.b.client.PutItem(ctx, p.b.claimInput(ctx, k.key, token(), time.Now()))
		return err
	}, nil
}

// updateItem is the completion's UpdateItem of a key claimed in prepare.
func (p *probe) updateItem(ctx context.Context) (func(context.Context) error, error) {
	k, tok := p.b.newRawKey(), token()
	if _, err := p.b.client.PutItem(ctx, p.b.claimInput(ctx, k.key, tok, time.Now())); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := p.b.client.UpdateItem(ctx, p.b.completionInput(k, tok, time.Now()))
		return err
	}, nil
}

// partiQLInsert is dynamo.Store.ClaimMany of fresh records: one BatchExecuteStatement of
// PartiQL INSERTs.
func (p *probe) partiQLInsert(ctx context.Context) (func(context.Context) error, error) {
	recs, _ := p.claimRecords(ctx, p.n)
	return func(ctx context.Context) error { return p.claimAll(ctx, recs) }, nil
}

// partiQLUpdate is dynamo.Store.CompleteMany of records claimed in prepare: one
// BatchExecuteStatement of PartiQL UPDATEs conditional on the lease tokens.
func (p *probe) partiQLUpdate(ctx context.Context) (func(context.Context) error, error) {
	recs, keys := p.claimRecords(ctx, p.n)
	if err := p.claimAll(ctx, recs); err != nil {
		return nil, err
	}
	done := make([]*idemstore.Record, len(recs))
	for i, rec := range recs {
		done[i] = &idemstore.Record{
			Key:        rec.Key,
			Status:     idemstore.StatusCompleted,
			Expires:    time.Now().Add(expiry),
			Data:       []byte(keys[i].data),
			Encoding:   idem.JSONCodec{}.Name(),
			LeaseToken: rec.LeaseToken,
			Version:    idemstore.SchemaVersion,
		}
	}
	return func(ctx context.Context) error {
		return errors.Join(p.store.CompleteMany(ctx, done)...)
	}, nil
}

func (p *probe) claimAll(ctx context.Context, recs []*idemstore.Record) error {
	var errs []error
	for i, res := range p.store.ClaimMany(ctx, recs, time.Now()) {
		if res.Err == nil && !res.Claimed {
			res.Err = fmt.Errorf("record %d not claimed", i)
		}
		errs = append(errs, res.Err)
	}
	return errors.Join(errs...)
}

// transactPut is one TransactWriteItems of conditional Puts of claim items on fresh keys,
// each conditional on its key not existing.
func (p *probe) transactPut(context.Context) (func(context.Context) error, error) {
	keys := p.batchKeys()
	return func(ctx context.Context) error {
		now := time.Now()
		items := make([]types.TransactWriteItem, len(keys))
		for i, k := range keys {
			items[i].Put = &types.Put{
				TableName:                aws.String(p.b.table),
				Item:                     p.b.claimInput(ctx, k.key, token(), now).Item,
				ConditionExpression:      aws.String("attribute_not_exists(#id)"),
				ExpressionAttributeNames: map[string]string{"#id": "id"},
			}
		}
		_, err := p.b.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}, nil
}

// batchWrite is one BatchWriteItem of unconditional puts of claim items on fresh keys.
func (p *probe) batchWrite(context.Context) (func(context.Context) error, error) {
	keys := p.batchKeys()
	return func(ctx context.Context) error {
		now := time.Now()
		reqs := make([]types.WriteRequest, len(keys))
		for i, k := range keys {
			reqs[i].PutRequest = &types.PutRequest{Item: p.b.claimInput(ctx, k.key, token(), now).Item}
		}
		out, err := p.b.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{p.b.table: reqs},
		})
		if err == nil && len(out.UnprocessedItems) > 0 {
			err = errors.New("unprocessed items")
		}
		return err
	}, nil
}

// batchKeys returns fresh keys for one multi-item call.
func (p *probe) batchKeys() []rawKey {
	keys := make([]rawKey, p.n)
	for i := range keys {
		keys[i] = p.b.newRawKey()
	}
	return keys
}
