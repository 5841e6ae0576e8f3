package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	streamstypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go/logging"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/esm"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ddbrelay"
)

// dynamoBench is the DynamoDB outbox's environment: DynamoDB Local and its client.
type dynamoBench struct {
	endpoint string
	client   *dynamodb.Client
	batch    int
	keys     int
	poll     time.Duration
	runs     int
	memGuard bool // the relay's records in memory rather than on the idempotency table
}

// runDynamo measures the DynamoDB outbox on DynamoDB Local (its own unless url names an
// endpoint): producers on dynamo.Store with an outbox table, the table's stream drained
// by internal/esm (Lambda's event source mapping, emulated: batches of batch records,
// ReportBatchItemFailures, bisection) into a ddbrelay.Relay with its default options,
// publishing to the sink. The emulated mapping reads the stream every poll, as Lambda
// polls each shard (four times a second).
func runDynamo(url string, events, rate, backlog, batch, keys int, poll time.Duration, relayStore string) (err error) {
	if relayStore != "dynamo" && relayStore != "memory" {
		return fmt.Errorf("outbox-bench: -relay-store %q: dynamo or memory", relayStore)
	}
	ctx := context.Background()
	if url == "" {
		srv, err := ddblocal.Start(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, srv.Stop()) }()
		url = srv.Endpoint()
	}
	client := dynamodb.New(ddblocal.NewClient(url).Options(), func(o *dynamodb.Options) { o.Logger = logging.Nop{} })
	b := &dynamoBench{endpoint: url, client: client, batch: batch, keys: keys, poll: poll, memGuard: relayStore == "memory"}
	fmt.Printf("outbox-bench: DynamoDB Local, stream batch %d, poll every %s, %d ordering keys, relay records in %s\n", batch, poll, keys, relayStore)
	// DynamoDB Local's JVM and the relay's first batches are slow (a first batch of 3
	// events took 3 s here): a warm-up run, not reported, on tables of its own.
	if err := b.latency(ctx, min(events, 200), rate, false); err != nil {
		return err
	}
	if err := b.latency(ctx, events, rate, true); err != nil {
		return err
	}
	return b.throughput(ctx, backlog)
}

// setup creates an idempotency table and an outbox table with its stream, the producers'
// guard and the relay's event source mapping publishing to snk.
func (b *dynamoBench) setup(ctx context.Context, snk outbox.Publisher) (*idem.Guard, *esm.Poller, error) {
	b.runs++
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36) + "_" + strconv.Itoa(b.runs)
	records, outboxTable := "outbox_bench_records_"+suffix, "outbox_bench_events_"+suffix
	if err := dynamo.CreateTable(ctx, b.client, records); err != nil {
		return nil, nil, err
	}
	if _, err := b.client.CreateTable(ctx, dynamo.OutboxTableInput(outboxTable)); err != nil {
		return nil, nil, err
	}
	store, err := dynamo.New(b.client, records, dynamo.WithOutboxTable(outboxTable))
	if err != nil {
		return nil, nil, err
	}
	g, err := idem.New(store, "bench")
	if err != nil {
		return nil, nil, err
	}
	// The relay's records are on a table of their own: with them on the producers' table,
	// most runs here failed on DynamoDB Local's locks (producers' completions past their
	// timeout, "too long waiting for a lock"; see BENCHMARKS.md).
	var relayStore idemstore.Store = memstore.New()
	if !b.memGuard {
		relayTable := "outbox_bench_relay_" + suffix
		if err := dynamo.CreateTable(ctx, b.client, relayTable); err != nil {
			return nil, nil, err
		}
		if relayStore, err = dynamo.New(b.client, relayTable); err != nil {
			return nil, nil, err
		}
	}
	rg, err := idem.New(relayStore, "outbox-relay")
	if err != nil {
		return nil, nil, err
	}
	relay, err := ddbrelay.New(rg, snk)
	if err != nil {
		return nil, nil, err
	}
	arn, err := esm.TableStreamARN(ctx, b.client, outboxTable)
	if err != nil {
		return nil, nil, err
	}
	p, err := esm.New(esm.NewDynamoDBStream(esm.NewStreamsClient(b.endpoint), arn), relay.Handle,
		esm.WithReportBatchItemFailures(), esm.WithBisectBatchOnFunctionError(), esm.WithBatchSize(b.batch))
	return g, p, err
}

// pollStream drains the stream every b.poll until ctx ends. DynamoDB Local answers
// TrimmedDataAccessException to a read whose TRIM_HORIZON iterator was taken while the
// shard was empty and records arrived since; the next drain takes a new iterator.
func (b *dynamoBench) pollStream(ctx context.Context, p *esm.Poller) error {
	for {
		var trimmed *streamstypes.TrimmedDataAccessException
		if _, err := p.Drain(ctx); err != nil && !errors.As(err, &trimmed) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.poll):
		}
	}
}

func (b *dynamoBench) latency(ctx context.Context, events, rate int, report bool) error {
	snk := &sink{at: map[string]time.Time{}, want: events, done: make(chan struct{})}
	done := snk.done
	g, p, err := b.setup(ctx, snk)
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	pollDone := make(chan error, 1)
	go func() { pollDone <- b.pollStream(rctx, p) }()
	committed, err := commitAtRate(ctx, g, events, rate, b.keys)
	if err != nil {
		return err
	}
	select {
	case <-done:
	case err := <-pollDone:
		return fmt.Errorf("latency: the stream's poller stopped: %w", err)
	case <-time.After(time.Minute):
		return fmt.Errorf("latency: not every event was published within a minute")
	}
	stop()
	if err := <-pollDone; !errors.Is(err, context.Canceled) {
		return err
	}
	if !report {
		return nil
	}
	fromAck, early := snk.sinceAck(committed)
	fmt.Printf("latency: %d events at %d/s, 1 relay (ddbrelay on the outbox stream, polled every %s)\n", events, rate, b.poll)
	fmt.Printf("  from the producer's guarded call returning to publish (0 if earlier: %d of %d): p50 %s, p90 %s, p99 %s, max %s\n",
		early, events, pct(fromAck, 50), pct(fromAck, 90), pct(fromAck, 99), fromAck[len(fromAck)-1])
	return nil
}

func (b *dynamoBench) throughput(ctx context.Context, backlog int) error {
	snk := &sink{at: map[string]time.Time{}, want: backlog, done: make(chan struct{})}
	done := snk.done
	g, p, err := b.setup(ctx, snk)
	if err != nil {
		return err
	}
	if err := fillBacklog(ctx, g, backlog, b.keys); err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	pollDone := make(chan error, 1)
	go func() { pollDone <- b.pollStream(rctx, p) }()
	select {
	case <-done:
	case err := <-pollDone:
		return fmt.Errorf("throughput: the stream's poller stopped: %w", err)
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("throughput: the backlog was not drained within 5 minutes")
	}
	elapsed := time.Since(start)
	stop()
	if err := <-pollDone; !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Printf("throughput: backlog of %d events, 1 relay: drained in %s, %.0f events/s\n",
		backlog, elapsed.Round(time.Millisecond), float64(backlog)/elapsed.Seconds())
	return nil
}
