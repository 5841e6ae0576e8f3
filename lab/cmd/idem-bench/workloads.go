package main

import (
	"context"
	"crypto/md5" //nolint:gosec // SQS's md5OfBody is an MD5 digest; nothing here relies on it
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// preclaimed are the positions (from 0) of the W4b records held by blocked invocations.
var preclaimed = []int{2, 5, 8}

// handler is the guarded function of W1–W3: no I/O, no sleep.
func (b *bench) handler(ev event) func(context.Context) (response, error) {
	return func(context.Context) (response, error) {
		b.executions.Add(1)
		return response{OK: true, ID: ev.ID}, nil
	}
}

func (b *bench) handleMessage(context.Context, events.SQSMessage) error {
	b.executions.Add(1)
	return nil
}

// sequential runs op for i in [0, n), one after another, each with a fresh deadline on its
// context, as one measured region; op reports whether its call went as the workload wants.
// It returns the region's result (without checks) and how many calls did not.
func (b *bench) sequential(name, unit string, n int, op func(ctx context.Context, i int) bool) (*result, int) {
	lat := make([]time.Duration, n)
	failed := 0
	exec0 := b.executions.Load()
	b.m.reset()
	b.m.begin()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		ok := op(ctx, i)
		lat[i] = time.Since(start)
		cancel()
		if !ok {
			failed++
		}
	}
	b.m.end()
	return b.m.result(name, unit, lat, b.executions.Load()-exec0), failed
}

// newKeys is W1: one invocation per fresh key, one after another.
func (b *bench) newKeys(name string, evs []event) *result {
	r, failed := b.sequential(name, "invocation", len(evs), func(ctx context.Context, i int) bool {
		_, _, err := idem.Do(ctx, b.guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil
	})
	r.check(failed == 0, "%d invocations failed", failed)
	r.check(r.HandlerExecutions == int64(len(evs)), "%d executions, want %d", r.HandlerExecutions, len(evs))
	return r
}

// replays is W2: the W1 events again, in order.
func (b *bench) replays(evs []event) *result {
	r, failed := b.sequential("W2_replays", "invocation", len(evs), func(ctx context.Context, i int) bool {
		res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: evs[i].ID}, b.handler(evs[i]))
		return err == nil && replayed && res.OK && res.ID == evs[i].ID
	})
	r.check(r.HandlerExecutions == 0, "%d executions, want 0", r.HandlerExecutions)
	r.check(failed == 0, "%d replays failed or returned another key's result", failed)
	return r
}

// contention is W3: rounds of goroutines released together on one fresh key each.
func (b *bench) contention(name string, rounds int) *result {
	g := w3Goroutines
	evs := newEvents(rounds)
	lat := make([]time.Duration, rounds*g)
	roundWall := make([]time.Duration, rounds)
	var inProgress, replays, others atomic.Int64
	badRounds := 0
	exec0 := b.executions.Load()
	b.m.reset()
	b.m.begin()
	for r, ev := range evs {
		before := b.executions.Load()
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		for i := range g {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				fn := b.handler(ev)
				ready.Done()
				<-start
				t0 := time.Now()
				res, replayed, err := idem.Do(ctx, b.guard, idem.Request{Key: ev.ID}, fn)
				lat[r*g+i] = time.Since(t0)
				switch {
				case errors.Is(err, idem.ErrInProgress):
					inProgress.Add(1)
				case err != nil || res.ID != ev.ID:
					others.Add(1)
				case replayed:
					replays.Add(1)
				}
			}()
		}
		ready.Wait()
		t0 := time.Now()
		close(start)
		done.Wait()
		roundWall[r] = time.Since(t0)
		if b.executions.Load()-before != 1 {
			badRounds++
		}
	}
	b.m.end()
	execs := b.executions.Load() - exec0
	res := b.m.result(name, "invocation", lat, execs)
	slices.Sort(roundWall)
	ip, rp := inProgress.Load(), replays.Load()
	perKey := float64(execs) / float64(max(rounds, 1))
	p50, p99 := us(percentile(roundWall, 50)), us(percentile(roundWall, 99))
	res.InProgressErrors, res.CompletedReplays = &ip, &rp
	res.HandlerExecutionsPerKey, res.RoundWallP50US, res.RoundWallP99US = &perKey, &p50, &p99
	res.check(badRounds == 0, "%d keys did not run exactly once", badRounds)
	res.check(others.Load() == 0, "%d errors other than in-progress", others.Load())
	return res
}

// sqsBatches is W4: batches of fresh messages, one after another.
func (b *bench) sqsBatches(name string, batches int) *result {
	evs := newSQSEvents(batches, batchSize)
	r, failed := b.sequential(name, "batch", batches, func(ctx context.Context, i int) bool {
		resp, err := b.sqs.Handle(ctx, evs[i])
		return err == nil && len(resp.BatchItemFailures) == 0
	})
	want := int64(batches * batchSize)
	if r.WallMS > 0 {
		rps := round(float64(want)/(r.WallMS/1e3), 1)
		r.RecordsPerS = &rps
	}
	r.check(failed == 0, "%d batches reported failures or an error", failed)
	r.check(r.HandlerExecutions == want, "%d executions, want %d", r.HandlerExecutions, want)
	return r
}

// sqsInProgress is W4b: batches in which three records are held by other invocations of
// the same guard, which claim before the timed batch and complete after it.
func (b *bench) sqsInProgress() *result {
	batches := b.w4bBatches
	evs := newSQSEvents(batches, batchSize)
	lat := make([]time.Duration, batches)
	var exact, execs int64
	var blockerErrs atomic.Int64
	b.m.reset()
	for i, ev := range evs {
		release, wait := b.block(ev, &blockerErrs)
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
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
	r := b.m.result("W4b_sqs_batch_3_inprogress", "batch", lat, execs)
	r.BatchesReportingExactlyPreclaimed = &exact
	want := int64(batches * (batchSize - len(preclaimed)))
	r.check(exact == int64(batches), "%d of %d batches reported exactly the preclaimed records", exact, batches)
	r.check(execs == want, "%d executions, want %d", execs, want)
	r.check(blockerErrs.Load() == 0, "%d blocking invocations failed", blockerErrs.Load())
	return r
}

// block claims the preclaimed records of ev with invocations that hold them until release
// is closed; it returns once all hold their claim. wait waits for them to complete.
func (b *bench) block(ev events.SQSEvent, errs *atomic.Int64) (release chan struct{}, wait func()) {
	release = make(chan struct{})
	var claimed, done sync.WaitGroup
	for _, pos := range preclaimed {
		id := ev.Records[pos].MessageId
		claimed.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			ran := false
			_, _, err := idem.Do(ctx, b.guard, idem.Request{Key: id}, func(context.Context) (response, error) {
				ran = true
				claimed.Done()
				<-release
				return response{OK: true, ID: id}, nil
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

// The requests of X1 and X2 are those dynamo.Store sends for a claim and a completion with
// the default attribute names and payload validation off, written out against the SDK
// (from dynamo/store.go, dynamo/expr.go and dynamo/record.go). Their being the same is what
// makes X1 and X2 the floor under W1 and W2; TestRun checks that their bytes match. The
// completion removes data_ref, as the library's does with the result inline: a completion
// sent again after a lost answer may find the record completed with its result apart
// (26 bytes more than before results could be kept apart).
const (
	rawClaimCondition = "attribute_not_exists(#id) OR #exp <= :now OR (#status = :inprogress AND #lease <= :now_ms AND " +
		"(attribute_not_exists(#token) OR #token <> :released) AND (attribute_not_exists(#cp) OR #cp = :empty))"
	rawCompletion = "SET #status = :status, #v = :v, #exp = :exp, #enc = :enc, #data = :data REMOVE #lease, #fp, #dref"
)

// rawKey is one key of X1 and X2, as the guard stores it, with the result it completes to.
type rawKey struct{ key, data string }

func (b *bench) newRawKeys(n int) []rawKey {
	keys := make([]rawKey, n)
	for i := range keys {
		id := uuid4()
		key, err := b.guard.StoredKey(idem.Request{Key: id})
		if err != nil {
			panic(err) // a UUID is always a valid key
		}
		data, _ := json.Marshal(response{OK: true, ID: id})
		keys[i] = rawKey{key: key, data: string(data)}
	}
	return keys
}

func str(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }

func epoch(t time.Time, unit time.Duration) *types.AttributeValueMemberN {
	per := int64(time.Second / unit)
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix()*per+int64(t.Nanosecond())/int64(unit), 10)}
}

// claimInput is the claim's conditional PutItem of key by token tok, with a lease to ctx's
// deadline.
func (b *bench) claimInput(ctx context.Context, key, tok string) *dynamodb.PutItemInput {
	now := time.Now()
	lease, _ := ctx.Deadline()
	return &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"id": str(key), "status": str(string(idemstore.StatusInProgress)),
			"v":           &types.AttributeValueMemberN{Value: strconv.Itoa(idemstore.SchemaVersion)},
			"lease_token": str(tok), "expiration": epoch(now.Add(expiry), time.Second),
			"in_progress_expiration": epoch(lease, time.Millisecond),
		},
		ConditionExpression: aws.String(rawClaimCondition),
		ExpressionAttributeNames: map[string]string{
			"#id": "id", "#exp": "expiration", "#status": "status", "#lease": "in_progress_expiration", "#cp": "checkpoint",
			"#token": "lease_token",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": epoch(now, time.Second), ":now_ms": epoch(now, time.Millisecond),
			":inprogress": str(string(idemstore.StatusInProgress)),
			":released":   str(idemstore.ReleasedToken(tok)), ":empty": str(""),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// rawPutUpdate is X1: per fresh key, the claim and the completion straight from the SDK.
func (b *bench) rawPutUpdate(keys []rawKey) *result {
	r, failed := b.sequential("X1_raw_sdk_put_update", "invocation", len(keys), func(ctx context.Context, i int) bool {
		tok := token()
		if _, err := b.client.PutItem(ctx, b.claimInput(ctx, keys[i].key, tok)); err != nil {
			return false
		}
		_, err := b.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(table),
			Key:                 map[string]types.AttributeValue{"id": str(keys[i].key)},
			UpdateExpression:    aws.String(rawCompletion),
			ConditionExpression: aws.String("#token = :token"),
			ExpressionAttributeNames: map[string]string{
				"#status": "status", "#v": "v", "#lease": "in_progress_expiration", "#exp": "expiration",
				"#enc": "enc", "#data": "data", "#fp": "validation", "#dref": "data_ref", "#token": "lease_token",
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":token": str(tok), ":status": str(string(idemstore.StatusCompleted)),
				":v":   &types.AttributeValueMemberN{Value: strconv.Itoa(idemstore.SchemaVersion)},
				":exp": epoch(time.Now().Add(expiry), time.Second), ":enc": str(idem.JSONCodec{}.Name()),
				":data": str(keys[i].data),
			},
		})
		return err == nil
	})
	r.check(failed == 0, "%d put/update pairs failed", failed)
	return r
}

// rawPutConflict is X2: the claim again on the X1 keys, failing its condition and returning
// the completed item.
func (b *bench) rawPutConflict(keys []rawKey) *result {
	r, failed := b.sequential("X2_raw_sdk_put_conflict", "invocation", len(keys), func(ctx context.Context, i int) bool {
		_, err := b.client.PutItem(ctx, b.claimInput(ctx, keys[i].key, token()))
		var ccf *types.ConditionalCheckFailedException
		return errors.As(err, &ccf) && len(ccf.Item) > 0
	})
	r.check(failed == 0, "%d puts did not fail their condition with the old item", failed)
	return r
}

// body is the payload of every event and message: 256 × 'x'.
var body = strings.Repeat("x", 256)

// event is the invocation event of W1–W3.
type event struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

// response is what the handler returns, and a replay hands back.
type response struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

// token returns 16 random bytes in hex, the form of the guard's lease tokens.
func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// uuid4 returns a random (version 4) UUID in its canonical form.
func uuid4() string {
	h := []byte(token())
	h[12], h[16] = '4', "89ab"[h[16]%4]
	return string(h[0:8]) + "-" + string(h[8:12]) + "-" + string(h[12:16]) + "-" + string(h[16:20]) + "-" + string(h[20:32])
}

func newEvents(n int) []event {
	evs := make([]event, n)
	for i := range evs {
		evs[i] = event{ID: uuid4(), Body: body}
	}
	return evs
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
				MessageId:     uuid4(),
				ReceiptHandle: "AQEB" + base64.StdEncoding.EncodeToString(handle[:]),
				Body:          body,
				Md5OfBody:     hex.EncodeToString(sum[:]),
				Attributes: map[string]string{
					"ApproximateReceiveCount": "1", "SentTimestamp": sent,
					"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": sent,
				},
				MessageAttributes: map[string]events.SQSMessageAttribute{},
				EventSource:       "aws:sqs",
				EventSourceARN:    "arn:aws:sqs:us-east-1:123456789012:idem-bench", // a standard queue
				AWSRegion:         "us-east-1",
			}
		}
		evs[i] = events.SQSEvent{Records: recs}
	}
	return evs
}
