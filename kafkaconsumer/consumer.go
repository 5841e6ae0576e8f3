package kafkaconsumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

// Consumer consumes Kafka topics in a consumer group through franz-go, running each record
// once per idempotency key and committing offsets only past records whose outcome is
// recorded. Its methods [Consumer.Poll] and [Consumer.Run] must not be called
// concurrently; [Consumer.Close] may be called from any goroutine.
type Consumer struct {
	client *kgo.Client
	engine *batch.Engine
	fn     func(context.Context, *kgo.Record) error
	cfg    config
	logger *slog.Logger
	// cluster is the Kafka cluster id, read at the first poll: the offset keys' prefix.
	cluster       string
	clusterLoaded bool

	// mu guards acked: offsets acknowledged by a batch but not yet committed (a commit
	// failed), committed with the next batch or when their partition is revoked, dropped
	// when it is lost. The group callbacks run between polls (BlockRebalanceOnPoll), but
	// Close may run them from another goroutine.
	mu    sync.Mutex
	acked map[partition]kgo.EpochOffset
}

type partition struct {
	topic string
	id    int32
}

// source names the consumer's batches in the engine's log lines and hooks.
var source = batch.Source{Name: "kafkaconsumer", System: "kafka", Item: "record", IDAttr: "record_id"}

// New returns a Consumer that runs fn for each record, guarded by guard, on a franz-go
// client made from clientOpts, which joins its group at once. Close it with
// [Consumer.Close]. Options are applied in order; invalid settings return an error
// wrapping idem.ErrInvalidOption that names the option.
//
//   - clientOpts must name the consumer group (kgo.ConsumerGroup), the topics
//     (kgo.ConsumeTopics) and the brokers (kgo.SeedBrokers).
//   - New adds kgo.DisableAutoCommit, kgo.BlockRebalanceOnPoll, kgo.OnPartitionsRevoked
//     and kgo.OnPartitionsLost, which must not be set otherwise: the Consumer commits
//     offsets itself, only past records whose outcome is recorded, and no rebalance takes
//     a partition while a batch of it runs.
//   - fn should honour its context: it carries the batch's deadline (see
//     [WithBatchTimeout]) and the lease that idem.Attach and idem.Checkpoint use.
//   - The Consumer takes from guard its clock, its logger (a summary line per batch and a
//     line per failed record, named "<topic>-<partition>@<offset>", never by its key or
//     value) and its hooks (OnBatch gets each batch with those names as item IDs).
func New(guard *idem.Guard, fn func(context.Context, *kgo.Record) error, clientOpts []kgo.Opt, opts ...Option) (*Consumer, error) {
	cfg := defaultConfig()
	engine, err := batch.NewAdapter(guard, fn == nil, "New", source, &cfg, opts)
	if err != nil {
		return nil, err
	}
	c := &Consumer{engine: engine, fn: fn, cfg: cfg, logger: guard.Logger(), acked: make(map[partition]kgo.EpochOffset)}
	kopts := append(slices.Clone(clientOpts),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)
	client, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: kafkaconsumer: New: %w", idem.ErrInvalidOption, err)
	}
	if group, _ := client.OptValue(kgo.ConsumerGroup).(string); group == "" {
		client.Close()
		return nil, optErr("New", "client options must name a consumer group (kgo.ConsumerGroup)")
	}
	c.client = client
	return c, nil
}

// Client returns the consumer's franz-go client, for what the Consumer does not do
// (producing, metrics, admin requests). Do not poll, commit or close through it.
func (c *Consumer) Client() *kgo.Client { return c.client }

// Close leaves the group and closes the client. A batch in progress finishes first, and
// the offsets it acknowledged are committed as the group revokes the partitions.
func (c *Consumer) Close() { c.client.Close() }

// Run polls and processes batches ([Consumer.Poll]) until ctx ends or the consumer is
// closed, and then returns nil. After a batch in which a record failed, or a poll or commit
// that failed, it waits (see [WithRetryBackoff]) before polling again, and logs the poll or
// commit error at WARN; failed records are logged by the engine. A record that keeps
// failing (a store that stays down, a handler that always fails) holds its partition
// there, retried, never skipped: a handler that wants to skip a record returns nil.
func (c *Consumer) Run(ctx context.Context) error {
	var wait time.Duration
	for {
		rep, err := c.Poll(ctx)
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.logger.WarnContext(ctx, "kafkaconsumer: poll failed", "error", err)
		}
		if err == nil && rep.Failed == 0 {
			wait = 0
			continue
		}
		wait = min(max(2*wait, c.cfg.backoff), c.cfg.maxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Poll polls one batch of up to [WithMaxRecords] records, processes it, commits and
// reports it:
//
//   - Each record runs the handler under its key (see [WithKey], [WithKeyHeader])
//     through idem: a key completed earlier replays without running (batch.StatusReplayed),
//     as a batch redelivered after a crash or a rebalance does.
//   - The records of one record key within a partition run one at a time in offset order;
//     after a failure the rest of them are not started (batch.ReasonGroupStopped). Other keys
//     run concurrently, up to [WithConcurrency].
//   - A record whose key another consumer holds (batch.ReasonInProgress: the partition's
//     previous owner, still running after a rebalance) fails, and is polled again until
//     it replays that owner's result, or runs if that owner released its key.
//   - Per partition, the offset after the last record before its first failure is
//     committed: every record below it has its outcome recorded. The partition is then
//     consumed again from its first failure ([Report.Retried]), so nothing after a
//     failure is skipped; the records of other keys that succeeded replay.
//   - No rebalance runs while the batch does: the group's revocation waits until every
//     record has finished and its outcome is recorded (or its claim released), and the
//     batch's offsets are committed.
//
// ctx bounds both the wait for records and the batch: a deadline sooner than
// [WithBatchTimeout]'s is the batch's, and records not started when ctx ends are polled
// again. Poll returns the error wrapping [ErrClosed] once the consumer is closed, ctx's error if
// ctx ended before records came, an error wrapping [ErrFetch] for partitions that could
// not be fetched, and one wrapping [ErrCommit] if the commit failed; with a report of the
// records processed but for ErrClosed and ctx's error.
func (c *Consumer) Poll(ctx context.Context) (*Report, error) {
	if err := c.loadCluster(ctx); err != nil {
		return nil, err
	}
	fetches := c.client.PollRecords(ctx, c.cfg.maxRecords)
	defer c.client.AllowRebalance()
	if fetches.IsClientClosed() {
		return nil, ErrClosed
	}
	var ferrs []error
	fetches.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		ferrs = append(ferrs, fmt.Errorf("%s-%d: %w", topic, p, err))
	})
	recs, topicIDs := records(fetches)
	if len(recs) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep := &Report{}
	if len(recs) > 0 {
		rep = c.process(ctx, recs, topicIDs)
	}
	err := c.commit(ctx, recs, rep)
	if len(ferrs) > 0 {
		err = errors.Join(fmt.Errorf("%w: %w", ErrFetch, errors.Join(ferrs...)), err)
	}
	return rep, err
}

// records returns the fetched records, in the order of fetches.Records, and the id of each
// one's topic as the fetch gave it (zero if it gave none): a kgo.Record does not carry it.
func records(fetches kgo.Fetches) ([]*kgo.Record, [][16]byte) {
	n := fetches.NumRecords()
	recs, ids := make([]*kgo.Record, 0, n), make([][16]byte, 0, n)
	for _, f := range fetches {
		for _, t := range f.Topics {
			for _, p := range t.Partitions {
				recs = append(recs, p.Records...)
				for range p.Records {
					ids = append(ids, t.TopicID)
				}
			}
		}
	}
	return recs, ids
}

// process runs recs through the engine, ordered per partition and record key; topicIDs[i]
// is the id of recs[i]'s topic.
func (c *Consumer) process(ctx context.Context, recs []*kgo.Record, topicIDs [][16]byte) *Report {
	items := make([]batch.Item, len(recs))
	topics := map[string]bool{}
	for i, r := range recs {
		topics[r.Topic] = true
		it := &items[i]
		it.ID, it.Group = itemID(r), TopicPartition(r)+"\x00"+string(r.Key)
		it.Key, it.Fingerprint, it.Err = c.cfg.identify(c.cluster, topicIDs[i], r)
	}
	destination := ""
	if len(topics) == 1 {
		destination = recs[0].Topic
	}
	if c.cfg.batchTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.batchTimeout)
		defer cancel()
	}
	run := func(ctx context.Context, i int) error { return c.fn(ctx, recs[i]) }
	br := c.engine.Process(ctx, items, run, batch.Mode{Ordered: true, RecordBeforeNext: true, Destination: destination})
	rep := &Report{
		Outcomes: make([]Outcome, len(recs)),
		Ran:      br.Ran, Replayed: br.Replayed, Duplicates: br.Duplicates, Failed: br.Failed,
		Duration: br.Duration,
	}
	for i, o := range br.Outcomes {
		r := recs[i]
		rep.Outcomes[i] = Outcome{
			ID: o.ID, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: o.Key,
			Status: o.Status, Reason: o.Reason, Err: o.Err, Duration: o.Duration,
		}
	}
	return rep
}

// loadCluster reads the Kafka cluster id from the brokers once, before the first poll: the
// prefix of the offset keys (see [OffsetKey]). A broker that reports none leaves it empty.
func (c *Consumer) loadCluster(ctx context.Context) error {
	if c.clusterLoaded {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers and the cluster id, no topics
	resp, err := req.RequestWith(ctx, c.client)
	if err != nil {
		if errors.Is(err, kgo.ErrClientClosed) {
			return ErrClosed
		}
		return fmt.Errorf("%w: cluster id: %w", ErrFetch, err)
	}
	if resp.ClusterID != nil {
		c.cluster = *resp.ClusterID
	}
	c.clusterLoaded = true
	return nil
}
