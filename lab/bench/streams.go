package bench

import (
	"context"
	"crypto/md5" //nolint:gosec // DynamoDB Streams eventIDs are MD5-shaped; nothing relies on it
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem/dynamostream"
	"github.com/idemkit/idem/kinesis"
)

// Sizes of the stream workloads.
const (
	// StreamBatchSize is the records per Kinesis or DynamoDB Streams event.
	StreamBatchSize = 100
	// FailAt is the position (from 0) of W5c's failing record.
	FailAt = 40
)

// Sequence numbers of BENCHMARKS.md: Kinesis from a 56-digit number up by 1,000,000,
// DynamoDB Streams from a 21-digit one up by 100.
var (
	kinesisSeq0 = mustBig("49590338271490256608559692538361571095921575989136588898")
	ddbSeq0     = mustBig("100000000000000000100")
)

func mustBig(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("bench: bad sequence number " + s)
	}
	return n
}

// streams holds the stream handlers: ordered (the shard in order, nothing after a failure:
// the setting BENCHMARKS.md compares) and concurrent (the adapters' default: in order per
// partition key or item, keys concurrently). Keys: Kinesis sequence numbers, DynamoDB
// Streams eventIDs (the adapters' defaults); payload validation off.
type streams struct {
	kinOrdered, kinConcurrent *kinesis.Handler
	ddbOrdered, ddbConcurrent *dynamostream.Handler
	nextKin, nextDDB          *big.Int // the next fresh sequence numbers

	// fail, while set, fails each listed record once (W5c).
	mu   sync.Mutex
	fail map[string]bool
	ran  map[string]int // executions per sequence number, while fail is set
}

func (b *Bench) newStreams() error {
	s := &streams{nextKin: new(big.Int).Set(kinesisSeq0), nextDDB: new(big.Int).Set(ddbSeq0)}
	noKinFP := func(events.KinesisEventRecord) ([]byte, error) { return nil, nil }
	noDDBFP := func(events.DynamoDBEventRecord) ([]byte, error) { return nil, nil }
	shardKin := func(events.KinesisEventRecord) string { return "shard" }
	shardDDB := func(events.DynamoDBEventRecord) string { return "shard" }
	var err error
	if s.kinOrdered, err = kinesis.New(b.Guard, b.handleKinesis, kinesis.WithFingerprint(noKinFP), kinesis.WithOrderingKey(shardKin)); err != nil {
		return err
	}
	if s.kinConcurrent, err = kinesis.New(b.Guard, b.handleKinesis, kinesis.WithFingerprint(noKinFP)); err != nil {
		return err
	}
	if s.ddbOrdered, err = dynamostream.New(b.Guard, b.handleDDB, dynamostream.WithFingerprint(noDDBFP), dynamostream.WithOrderingKey(shardDDB)); err != nil {
		return err
	}
	if s.ddbConcurrent, err = dynamostream.New(b.Guard, b.handleDDB, dynamostream.WithFingerprint(noDDBFP)); err != nil {
		return err
	}
	b.streams = s
	return nil
}

var errFailOnce = errors.New("bench: the record fails once")

func (b *Bench) handleKinesis(_ context.Context, r events.KinesisEventRecord) error {
	s := b.streams
	s.mu.Lock()
	if s.fail != nil {
		seq := r.Kinesis.SequenceNumber
		if s.fail[seq] {
			delete(s.fail, seq)
			s.mu.Unlock()
			return errFailOnce
		}
		s.ran[seq]++
	}
	s.mu.Unlock()
	b.executions.Add(1)
	return nil
}

func (b *Bench) handleDDB(context.Context, events.DynamoDBEventRecord) error {
	b.executions.Add(1)
	return nil
}

// streamHandle builds batches fresh events and returns the call that sends event i.
func (b *Bench) streamHandle(kinesisSource, ordered bool, batches int) func(ctx context.Context, i int) (int, error) {
	s := b.streams
	if kinesisSource {
		evs := s.newKinesisEvents(batches)
		h := s.kinConcurrent
		if ordered {
			h = s.kinOrdered
		}
		return func(ctx context.Context, i int) (int, error) {
			resp, err := h.Handle(ctx, evs[i])
			return len(resp.BatchItemFailures), err
		}
	}
	evs := s.newDDBEvents(batches)
	h := s.ddbConcurrent
	if ordered {
		h = s.ddbOrdered
	}
	return func(ctx context.Context, i int) (int, error) {
		resp, err := h.Handle(ctx, evs[i])
		return len(resp.BatchItemFailures), err
	}
}

func (b *Bench) streamRun(name string, batches int, handle func(context.Context, int) (int, error), want int64) *Result {
	r, failed := b.Sequential(name, "batch", batches, func(ctx context.Context, i int) bool {
		n, err := handle(ctx, i)
		return err == nil && n == 0
	})
	setRecordsPerS(r, batches*StreamBatchSize)
	r.Check(failed == 0, "%d batches reported failures or an error", failed)
	r.Check(r.HandlerExecutions == want, "%d executions, want %d", r.HandlerExecutions, want)
	return r
}

// KinesisFail40 is W5c and W5c_retry on the ordered Kinesis handler: fresh events whose
// record [FailAt] fails once; then each event again from that record, as Lambda delivers
// it after the partial response.
func (b *Bench) KinesisFail40(batches int) (*Result, *Result) {
	s := b.streams
	evs := s.newKinesisEvents(batches)
	s.mu.Lock()
	s.fail, s.ran = map[string]bool{}, map[string]int{}
	for _, ev := range evs {
		s.fail[ev.Records[FailAt].Kinesis.SequenceNumber] = true
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.fail, s.ran = nil, nil
		s.mu.Unlock()
	}()
	exact, early := 0, 0
	first, _ := b.Sequential("W5c_kinesis_fail_40", "batch", batches, func(ctx context.Context, i int) bool {
		resp, err := s.kinOrdered.Handle(ctx, evs[i])
		want := evs[i].Records[FailAt].Kinesis.SequenceNumber
		if err == nil && len(resp.BatchItemFailures) == 1 && resp.BatchItemFailures[0].ItemIdentifier == want {
			exact++
		}
		s.mu.Lock()
		for _, rec := range evs[i].Records[FailAt:] {
			if s.ran[rec.Kinesis.SequenceNumber] > 0 {
				early++
			}
		}
		s.mu.Unlock()
		return true
	})
	setRecordsPerS(first, batches*StreamBatchSize)
	first.Check(exact == batches, "%d of %d first calls reported exactly record %d", exact, batches, FailAt)
	first.Check(early == 0, "%d records at or after %d ran before it succeeded", early, FailAt)
	first.Check(first.HandlerExecutions == int64(batches*FailAt), "%d executions, want %d", first.HandlerExecutions, batches*FailAt)
	retry, failed := b.Sequential("W5c_retry", "batch", batches, func(ctx context.Context, i int) bool {
		resp, err := s.kinOrdered.Handle(ctx, events.KinesisEvent{Records: evs[i].Records[FailAt:]})
		return err == nil && len(resp.BatchItemFailures) == 0
	})
	setRecordsPerS(retry, batches*(StreamBatchSize-FailAt))
	retry.Check(failed == 0, "%d retries reported failures or an error", failed)
	once := 0
	s.mu.Lock()
	for _, ev := range evs {
		for _, rec := range ev.Records {
			if s.ran[rec.Kinesis.SequenceNumber] == 1 {
				once++
			}
		}
	}
	s.mu.Unlock()
	retry.Check(once == batches*StreamBatchSize, "%d of %d records ran exactly once", once, batches*StreamBatchSize)
	return first, retry
}

// newKinesisEvents returns batches events of fresh records shaped as BENCHMARKS.md says.
func (s *streams) newKinesisEvents(batches int) []events.KinesisEvent {
	step := big.NewInt(1_000_000)
	evs := make([]events.KinesisEvent, batches)
	for i := range evs {
		recs := make([]events.KinesisEventRecord, StreamBatchSize)
		for j := range recs {
			seq := s.nextKin.String()
			s.nextKin.Add(s.nextKin, step)
			id := UUID4()
			recs[j] = events.KinesisEventRecord{
				AwsRegion: "us-east-1", EventID: "shardId-000000000000:" + seq, EventName: "aws:kinesis:record",
				EventSource: "aws:kinesis", EventVersion: "1.0",
				EventSourceArn:    "arn:aws:kinesis:us-east-1:123456789012:stream/idem-bench",
				InvokeIdentityArn: "arn:aws:iam::123456789012:role/idem-bench",
				Kinesis: events.KinesisRecord{
					KinesisSchemaVersion: "1.0", PartitionKey: UUID4(), SequenceNumber: seq,
					Data: []byte(fmt.Sprintf(`{"id":%q,"body":%q}`, id, body)),
				},
			}
		}
		evs[i] = events.KinesisEvent{Records: recs}
	}
	return evs
}

// newDDBEvents returns batches events of fresh INSERT records shaped as BENCHMARKS.md says.
func (s *streams) newDDBEvents(batches int) []events.DynamoDBEvent {
	step := big.NewInt(100)
	evs := make([]events.DynamoDBEvent, batches)
	for i := range evs {
		recs := make([]events.DynamoDBEventRecord, StreamBatchSize)
		for j := range recs {
			seq := s.nextDDB.String()
			s.nextDDB.Add(s.nextDDB, step)
			sum := md5.Sum([]byte(seq)) //nolint:gosec // see import
			id := events.NewStringAttribute(UUID4())
			recs[j] = events.DynamoDBEventRecord{
				AWSRegion: "us-east-1", EventID: hex.EncodeToString(sum[:]), EventName: "INSERT",
				EventSource: "aws:dynamodb", EventVersion: "1.1",
				EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/idem-bench/stream/2024-01-01T00:00:00.000",
				Change: events.DynamoDBStreamRecord{
					Keys:           map[string]events.DynamoDBAttributeValue{"id": id},
					NewImage:       map[string]events.DynamoDBAttributeValue{"id": id, "body": events.NewStringAttribute(body)},
					SequenceNumber: seq, SizeBytes: 300, StreamViewType: "NEW_AND_OLD_IMAGES",
				},
			}
		}
		evs[i] = events.DynamoDBEvent{Records: recs}
	}
	return evs
}

// streamSteps returns W5 to W6b: the ordered setting, then the concurrent one apart
// (suffix _concurrent). Each pair's second workload sends the first's events again.
func (b *Bench) streamSteps() []Step {
	c := b.cfg.Counts
	n := int64(c.W5Batches * StreamBatchSize)
	pair := func(name, again string, kinesisSource, ordered bool) []Step {
		var handle func(context.Context, int) (int, error)
		return []Step{
			func() *Result {
				handle = b.streamHandle(kinesisSource, ordered, c.W5Batches)
				return b.streamRun(name, c.W5Batches, handle, n)
			},
			func() *Result { return b.streamRun(again, c.W5Batches, handle, 0) },
		}
	}
	var retry *Result
	steps := pair("W5_kinesis_batch", "W5b_kinesis_redelivered", true, true)
	steps = append(steps,
		func() *Result { first, r := b.KinesisFail40(c.W5cBatches); retry = r; return first },
		func() *Result { return retry })
	steps = append(steps, pair("W6_ddbstreams_batch", "W6b_ddbstreams_redelivered", false, true)...)
	steps = append(steps, pair("W5_kinesis_batch_concurrent", "W5b_kinesis_redelivered_concurrent", true, false)...)
	return append(steps, pair("W6_ddbstreams_batch_concurrent", "W6b_ddbstreams_redelivered_concurrent", false, false)...)
}

// setRecordsPerS sets r's records_per_s: records sent over its wall time.
func setRecordsPerS(r *Result, records int) {
	if r.WallMS > 0 {
		rps := round(float64(records)/(r.WallMS/1e3), 1)
		r.RecordsPerS = &rps
	}
}
