package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// message builds a standard-queue message, as Lambda delivers it.
func message(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      id,
		Body:           body,
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:credits",
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
	}
}

// withKey sets the producer's idempotency key on m.
func withKey(m events.SQSMessage, key string) events.SQSMessage {
	m.MessageAttributes = map[string]events.SQSMessageAttribute{
		sqs.KeyAttribute: {StringValue: &key, DataType: "String"},
	}
	return m
}

// A producer sent one credit twice, and SQS later delivered the batch again: the credit
// is applied once, and nothing is reported for redelivery.
func Example() {
	guard, err := idem.New(memstore.New(), "credit-account", idem.WithScope("credits"))
	if err != nil {
		panic(err)
	}
	balance := 0
	h, err := sqs.New(guard, func(ctx context.Context, m events.SQSMessage) error {
		balance += 100 // with DynamoDB, attach the write to the completion: dynamo.Attach
		return nil
	}, sqs.WithConcurrency(1))
	if err != nil {
		panic(err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		withKey(message("m-1", `{"cents":100}`), "credit-42"),
		withKey(message("m-2", `{"cents":100}`), "credit-42"),
	}}
	for range 2 {
		resp, err := h.Handle(context.Background(), batch)
		fmt.Println(len(resp.BatchItemFailures), "failures", err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// 0 failures <nil>
	// 0 failures <nil>
	// balance: 100
}

func ExampleNew() {
	guard, _ := idem.New(memstore.New(), "credit-account")
	_, err := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil }, sqs.WithConcurrency(0))
	fmt.Println(err)
	// Output: idem: invalid option: sqs: WithConcurrency: must be at least 1
}

// In a Lambda function, pass Handle to lambda.Start, and enable ReportBatchItemFailures on
// the event source mapping.
func ExampleHandler_Handle() {
	guard, err := idem.New(memstore.New(), "credit-account") // dynamo.New(client, table) in production
	if err != nil {
		panic(err)
	}
	h, err := sqs.New(guard, func(ctx context.Context, m events.SQSMessage) error {
		return nil
	})
	if err != nil {
		panic(err)
	}
	lambda.Start(h.Handle)
}

// Process reports what became of each message.
func ExampleHandler_Process() {
	guard, _ := idem.New(memstore.New(), "credit-account")
	h, _ := sqs.New(guard, func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "" {
			return errors.New("empty credit")
		}
		return nil
	})
	rep, _ := h.Process(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message("m-1", `{"cents":100}`),
		message("m-2", ""),
		message("m-1", `{"cents":100}`), // SQS delivered m-1 twice in one batch
	}})
	for _, o := range rep.Outcomes {
		if o.Failed() {
			fmt.Println(o.MessageID, o.Status, o.Reason)
			continue
		}
		fmt.Println(o.MessageID, o.Status)
	}
	fmt.Println(rep.Response().BatchItemFailures)
	// Output:
	// m-1 ran
	// m-2 failed handler
	// m-1 duplicate
	// [{m-2}]
}

func ExampleDefaultKey() {
	fifo := message("m-1", "{}")
	fifo.Attributes["MessageDeduplicationId"] = "dedup-7"
	for _, m := range []events.SQSMessage{
		message("m-1", "{}"),
		fifo,
		withKey(fifo, "order-7"),
	} {
		key, _ := sqs.DefaultKey(m)
		fmt.Println(key)
	}
	// Output:
	// m-1
	// dedup-7
	// order-7
}

// On a FIFO queue, a failure holds back the rest of its message group; other groups go on.
func ExampleWithConcurrency() {
	guard, _ := idem.New(memstore.New(), "credit-account")
	h, _ := sqs.New(guard, func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "a-2" {
			return errors.New("account locked")
		}
		return nil
	}, sqs.WithConcurrency(2)) // two groups at a time, each in order
	fifoMsg := func(id, group string) events.SQSMessage {
		m := message(id, "{}")
		m.EventSourceARN += ".fifo"
		m.Attributes["MessageGroupId"] = group
		m.Attributes["MessageDeduplicationId"] = id
		return m
	}
	resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		fifoMsg("a-1", "a"), fifoMsg("b-1", "b"), fifoMsg("a-2", "a"), fifoMsg("b-2", "b"), fifoMsg("a-3", "a"),
	}})
	fmt.Println(resp.BatchItemFailures)
	// Output: [{a-2} {a-3}]
}

// A key function can read the key from the body, falling back to the default.
func ExampleWithKey() {
	guard, _ := idem.New(memstore.New(), "credit-account")
	runs := 0
	h, _ := sqs.New(guard, func(context.Context, events.SQSMessage) error { runs++; return nil },
		sqs.WithConcurrency(1),
		sqs.WithKey(func(m events.SQSMessage) (string, error) {
			if id, ok := strings.CutPrefix(m.Body, "transfer:"); ok {
				return "transfer-" + id, nil
			}
			return sqs.DefaultKey(m)
		}))
	_, _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message("m-1", "transfer:77"), message("m-2", "transfer:77"), message("m-3", "transfer:78"),
	}})
	fmt.Println("runs:", runs)
	// Output: runs: 2
}

// Fingerprint only the part of the body that matters, or return nil to turn payload
// validation off.
func ExampleWithFingerprint() {
	guard, _ := idem.New(memstore.New(), "credit-account")
	h, _ := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil },
		sqs.WithFingerprint(func(events.SQSMessage) ([]byte, error) { return nil, nil }))
	ctx := context.Background()
	_, _ = h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{withKey(message("m-1", "v1"), "k")}})
	resp, _ := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{withKey(message("m-2", "v2"), "k")}})
	fmt.Println(resp.BatchItemFailures)
	// Output: []
}

// Messages are not started when less than the margin is left before the deadline; they
// are reported, and SQS delivers them again.
func ExampleWithDeadlineMargin() {
	guard, _ := idem.New(memstore.New(), "credit-account")
	h, _ := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil },
		sqs.WithDeadlineMargin(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, _ := h.Process(ctx, events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}")}})
	fmt.Println(rep.Outcomes[0].Status, rep.Outcomes[0].Reason)
	// Output: failed not_started
}

// The guard's hooks report each batch (OnBatch), besides each message that reaches the
// guard: metrics (package emf) and traces (idemotel) come from them.
func Example_hooks() {
	guard, _ := idem.New(memstore.New(), "credit-account", idem.WithHooks(idem.Hooks{
		OnReplayed: func(context.Context, idem.Event) { fmt.Println("a stored result replayed") },
		OnBatch: func(_ context.Context, e idem.BatchEvent) {
			for _, it := range e.Items {
				if it.Reason != "" {
					fmt.Println(it.ID, it.Status, it.Reason)
					continue
				}
				fmt.Println(it.ID, it.Status)
			}
			fmt.Printf("ran %d, replayed %d, duplicates %d, failed %d\n", e.Ran, e.Replayed, e.Duplicates, e.Failed)
		},
	}))
	h, _ := sqs.New(guard, func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "" {
			return errors.New("empty")
		}
		return nil
	}, sqs.WithConcurrency(1))
	_, _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}"), message("m-2", "")}})
	_, _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}")}})
	// Output:
	// m-1 ran
	// m-2 failed handler
	// ran 1, replayed 0, duplicates 0, failed 1
	// a stored result replayed
	// m-1 replayed
	// ran 0, replayed 1, duplicates 0, failed 0
}

// The guard's logger gets one summary line per batch, WARN when a message failed, after a
// line per failed message, with its stored key (never the raw key) and the reason.
func Example_logging() {
	drop := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "duration" {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: drop}))
	guard, _ := idem.New(memstore.New(), "credit-account", idem.WithLogger(logger))
	h, _ := sqs.New(guard, func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "" {
			return errors.New("empty")
		}
		return nil
	})
	_, _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}"), message("m-2", "")}})
	// Output:
	// level=WARN msg="sqs: message failed" message_id=m-2 stored_key=default.credit-account#be62a44970fcdc86faa079c4ffd6cb98adfad91e833e38a0791d721a6d8991a8 reason=handler error=empty
	// level=WARN msg="sqs: batch processed" messages=2 fifo=false ran=1 replayed=0 duplicates=0 failed=1 failed_by.handler=1
}

// In a test, a fake clock on the guard drives the deadline margin: here one second is left.
func Example_clock() {
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	late := func() time.Time { return deadline.Add(-time.Second) }
	guard, _ := idem.New(memstore.New(), "credit-account", idem.WithClock(idem.ClockFunc(late)))
	h, _ := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil },
		sqs.WithDeadlineMargin(5*time.Second))
	resp, _ := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}")}})
	fmt.Println(resp.BatchItemFailures)
	// Output: [{m-1}]
}

// storeCalls is an in-memory store that counts the calls a batch makes.
type storeCalls struct {
	*memstore.Store
	single, many atomic.Int32 // messages run concurrently
}

func (s *storeCalls) Claim(ctx context.Context, rec *idemstore.Record, now time.Time) (*idemstore.Record, bool, error) {
	s.single.Add(1)
	return s.Store.Claim(ctx, rec, now)
}

func (s *storeCalls) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	s.single.Add(1)
	return s.Store.Complete(ctx, rec, attached)
}

func (s *storeCalls) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	s.many.Add(1)
	return s.Store.ClaimMany(ctx, recs, now)
}

func (s *storeCalls) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	s.many.Add(1)
	return s.Store.CompleteMany(ctx, recs)
}

func (s *storeCalls) Release(ctx context.Context, key, token string, now time.Time) error {
	s.single.Add(1)
	return s.Store.Release(ctx, key, token, now)
}

func (s *storeCalls) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	s.many.Add(1)
	return s.Store.ReleaseMany(ctx, keys, tokens, now)
}

// Batch claims, on by default, claim a batch's keys in one store call and record its
// outcomes in one more; off, each message makes its own two calls. The context has a
// deadline, as in Lambda: the outcomes wait for the batch's end only while their leases
// outlast it.
func ExampleWithBatchClaims() {
	batch := events.SQSEvent{Records: []events.SQSMessage{message("m-1", "{}"), message("m-2", "{}"), message("m-3", "{}")}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the function timeout
	defer cancel()
	for _, on := range []bool{true, false} {
		store := &storeCalls{Store: memstore.New()}
		guard, _ := idem.New(store, "credit-account")
		h, _ := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil },
			sqs.WithBatchClaims(on))
		rep, _ := h.Process(ctx, batch)
		fmt.Printf("batch claims %t: ran %d, batch calls %d, single calls %d\n", on, rep.Ran, store.many.Load(), store.single.Load())
	}
	// Output:
	// batch claims true: ran 3, batch calls 2, single calls 0
	// batch claims false: ran 3, batch calls 0, single calls 6
}
