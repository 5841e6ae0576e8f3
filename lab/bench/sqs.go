package bench

import (
	"context"
	"crypto/md5" //nolint:gosec // SQS's md5OfBody is an MD5 digest; nothing here relies on it
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// preclaimed are the positions (from 0) of the W4b records held by blocked invocations.
var preclaimed = []int{2, 5, 8}

// SQSBatches is W4: batches of [BatchSize] fresh messages, one after another. The bench
// must have been made with Config.SQS.
func (b *Bench) SQSBatches(name string, batches int) *Result {
	evs := newSQSEvents(batches, BatchSize)
	r, failed := b.Sequential(name, "batch", batches, func(ctx context.Context, i int) bool {
		resp, err := b.sqs.Handle(ctx, evs[i])
		return err == nil && len(resp.BatchItemFailures) == 0
	})
	want := int64(batches * BatchSize)
	if r.WallMS > 0 {
		rps := round(float64(want)/(r.WallMS/1e3), 1)
		r.RecordsPerS = &rps
	}
	r.Check(failed == 0, "%d batches reported failures or an error", failed)
	r.Check(r.HandlerExecutions == want, "%d executions, want %d", r.HandlerExecutions, want)
	return r
}

// SQSInProgress is W4b: batches in which three records are held by other invocations of
// the same guard, which claim before the timed batch and complete after it. The bench must
// have been made with Config.SQS.
func (b *Bench) SQSInProgress(batches int) *Result {
	evs := newSQSEvents(batches, BatchSize)
	lat := make([]time.Duration, batches)
	var exact, execs int64
	var blockerErrs atomic.Int64
	b.m.reset()
	for i, ev := range evs {
		release, wait := b.block(ev, &blockerErrs)
		ctx, cancel := context.WithTimeout(context.Background(), Deadline)
		exec0 := b.executions.Load()
		b.m.begin()
		start := time.Now()
		resp, err := b.sqs.Handle(ctx, ev)
		lat[i] = time.Since(start)
		b.m.end()
		cancel()
		execs += b.executions.Load() - exec0
		close(release)
		wait()
		if err == nil && reportsExactly(resp, ev) {
			exact++
		}
	}
	r := b.result("W4b_sqs_batch_3_inprogress", "batch", lat, execs)
	r.BatchesReportingExactlyPreclaimed = &exact
	want := int64(batches * (BatchSize - len(preclaimed)))
	r.Check(exact == int64(batches), "%d of %d batches reported exactly the preclaimed records", exact, batches)
	r.Check(execs == want, "%d executions, want %d", execs, want)
	r.Check(blockerErrs.Load() == 0, "%d blocking invocations failed", blockerErrs.Load())
	return r
}

// block claims the preclaimed records of ev with invocations that hold them until release
// is closed; it returns once all hold their claim. wait waits for them to complete.
func (b *Bench) block(ev events.SQSEvent, errs *atomic.Int64) (release chan struct{}, wait func()) {
	release = make(chan struct{})
	var claimed, done sync.WaitGroup
	for _, pos := range preclaimed {
		id := ev.Records[pos].MessageId
		claimed.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ctx, cancel := context.WithTimeout(context.Background(), Deadline)
			defer cancel()
			ran := false
			_, _, err := idem.Do(ctx, b.Guard, idem.Request{Key: id}, func(context.Context) (Response, error) {
				ran = true
				claimed.Done()
				<-release
				return Response{OK: true, ID: id}, nil
			})
			if !ran {
				claimed.Done()
			}
			if err != nil || !ran {
				errs.Add(1)
			}
		}()
	}
	claimed.Wait()
	return release, done.Wait
}

// reportsExactly reports whether resp lists as failures exactly the preclaimed records of ev.
func reportsExactly(resp events.SQSEventResponse, ev events.SQSEvent) bool {
	want := map[string]bool{}
	for _, p := range preclaimed {
		want[ev.Records[p].MessageId] = true
	}
	for _, f := range resp.BatchItemFailures {
		delete(want, f.ItemIdentifier)
	}
	return len(want) == 0 && len(resp.BatchItemFailures) == len(preclaimed)
}

// newSQSEvents returns batches of size fresh messages each, shaped like those Lambda
// receives from a standard queue.
func newSQSEvents(batches, size int) []events.SQSEvent {
	sum := md5.Sum([]byte(body)) //nolint:gosec // see import
	evs := make([]events.SQSEvent, batches)
	for i := range evs {
		sent := strconv.FormatInt(time.Now().UnixMilli(), 10)
		recs := make([]events.SQSMessage, size)
		for j := range recs {
			var handle [96]byte
			_, _ = rand.Read(handle[:])
			recs[j] = events.SQSMessage{
				MessageId:     UUID4(),
				ReceiptHandle: "AQEB" + base64.StdEncoding.EncodeToString(handle[:]),
				Body:          body,
				Md5OfBody:     hex.EncodeToString(sum[:]),
				Attributes: map[string]string{
					"ApproximateReceiveCount": "1", "SentTimestamp": sent,
					"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": sent,
				},
				MessageAttributes: map[string]events.SQSMessageAttribute{},
				EventSource:       "aws:sqs",
				// A standard queue.
				EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:idem-bench",
				AWSRegion:      "us-east-1",
			}
		}
		evs[i] = events.SQSEvent{Records: recs}
	}
	return evs
}
