package sqs_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// BenchmarkBatch measures Handle on a batch of ten messages (one op is one batch) with a
// handler that does nothing, so what is measured is the idempotency around it: ten new
// messages, ten replays of messages delivered once (the same messages sent again), or ten
// replays of redelivered messages (ApproximateReceiveCount 2, which batch claims leave to
// the per-message path), at concurrency 1 and at the default, with batch claims and per
// message, on the in-memory store and on DynamoDB Local. The DynamoDB variants report the
// requests per batch.
//
//	go test -run '^$' -bench BenchmarkBatch -benchmem ./sqs/
func BenchmarkBatch(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) (idemstore.Store, *countingAPI)
	}{
		{"mem", func(*testing.B) (idemstore.Store, *countingAPI) { return memstore.New(), nil }},
		{"dynamodb", func(b *testing.B) (idemstore.Store, *countingAPI) {
			client, idemTable, _ := ddbTables(b)
			api := ddbcount.New(client)
			store, err := dynamo.New(api, idemTable)
			if err != nil {
				b.Fatal(err)
			}
			return store, api
		}},
	}
	for _, st := range stores {
		for _, conc := range []int{1, sqs.DefaultConcurrency} {
			for _, path := range []string{"new", "replay", "redelivered"} {
				for _, batch := range []bool{true, false} {
					b.Run(fmt.Sprintf("%s/%s/concurrency=%d/batch=%t", st.name, path, conc, batch), func(b *testing.B) {
						store, api := st.open(b)
						guard, err := idem.New(store, "test", idem.WithScope("bench"))
						if err != nil {
							b.Fatal(err)
						}
						h, err := sqs.New(guard, func(context.Context, events.SQSMessage) error { return nil },
							sqs.WithConcurrency(conc), sqs.WithBatchClaims(batch))
						if err != nil {
							b.Fatal(err)
						}
						benchBatch(b, h, api, path)
					})
				}
			}
		}
	}
}

// benchBatch runs h on ten messages per op: new ones (fresh message IDs, prepared before
// the timer starts), or the same ten, processed once beforehand, replayed ("replay") or
// redelivered ("redelivered"). A warm-up batch runs first.
func benchBatch(b *testing.B, h *sqs.Handler, api *countingAPI, path string) {
	fresh := path == "new"
	ev := loadEvent(b, "sqs-standard-ten")
	for i := range ev.Records { // keyed by message ID, so a new ID is a new key
		delete(ev.Records[i].MessageAttributes, sqs.KeyAttribute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // a deadline, as in Lambda
	defer cancel()
	warm := ev // a batch of other messages first, so DynamoDB Local's JIT is warm
	warm.Records = append([]events.SQSMessage(nil), ev.Records...)
	for j := range warm.Records {
		warm.Records[j].MessageId += "-warm"
	}
	for range 3 {
		if _, err := h.Handle(ctx, warm); err != nil {
			b.Fatal(err)
		}
	}
	var ids [][]string
	if fresh {
		ids = make([][]string, b.N)
		for i := range ids {
			ids[i] = make([]string, len(ev.Records))
			for j, m := range ev.Records {
				ids[i][j] = m.MessageId + "-" + strconv.Itoa(i)
			}
		}
	} else if _, err := h.Handle(ctx, ev); err != nil {
		b.Fatal(err)
	}
	if path == "redelivered" {
		for j := range ev.Records {
			ev.Records[j].Attributes = maps.Clone(ev.Records[j].Attributes)
			ev.Records[j].Attributes["ApproximateReceiveCount"] = "2"
		}
	}
	if api != nil {
		api.Take()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if fresh {
			for j := range ev.Records {
				ev.Records[j].MessageId = ids[i][j]
			}
		}
		resp, err := h.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatal(resp, err)
		}
	}
	b.StopTimer()
	if api != nil {
		calls := 0
		for _, n := range api.Take() {
			calls += n
		}
		b.ReportMetric(float64(calls)/float64(b.N), "ddbcalls/batch")
	}
}

// BenchmarkBatchAttached measures Handle on DynamoDB Local on a batch of ten new messages
// whose handler attaches a credit (a DynamoDB ADD) to its completion (one op is one
// batch): to ten accounts, one each, or to the accounts of the sqs-standard-ten event
// (two of which it credits three times, which no transaction may touch twice). It reports
// the median batch time and the calls per batch by operation.
//
//	go test -run '^$' -bench BenchmarkBatchAttached -benchtime 200x ./sqs/
func BenchmarkBatchAttached(b *testing.B) {
	for _, accounts := range []string{"distinct", "event"} {
		b.Run("accounts="+accounts, func(b *testing.B) {
			client, idemTable, ledgerTable := ddbTables(b)
			api := ddbcount.New(client)
			store, err := dynamo.New(api, idemTable)
			if err != nil {
				b.Fatal(err)
			}
			l := &ddbLedger{client: client, table: ledgerTable}
			guard, err := idem.New(store, "test", idem.WithScope("bench"))
			if err != nil {
				b.Fatal(err)
			}
			h, err := sqs.New(guard, l.credit)
			if err != nil {
				b.Fatal(err)
			}
			ev := loadEvent(b, "sqs-standard-ten")
			for i := range ev.Records {
				delete(ev.Records[i].MessageAttributes, sqs.KeyAttribute)
				if accounts == "distinct" {
					ev.Records[i].Body = fmt.Sprintf(`{"account_id":"acc-%d","amount_cents":1}`, i)
				}
			}
			batch := func(tag string) time.Duration {
				for j := range ev.Records {
					ev.Records[j].MessageId = fmt.Sprintf("m%d-%s", j, tag)
				}
				// A Lambda-like deadline per invocation, within the default maximum lease:
				// an outcome waits for Settle only while its lease outlasts the deadline.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				resp, err := h.Handle(ctx, ev)
				d := time.Since(start)
				if err != nil || len(resp.BatchItemFailures) > 0 {
					b.Fatal(resp, err)
				}
				return d
			}
			for i := range 5 {
				batch("warm" + strconv.Itoa(i))
			}
			api.Take()
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				times = append(times, batch(strconv.Itoa(i)))
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms/batch")
			for op, n := range api.Take() {
				b.ReportMetric(float64(n)/float64(b.N), op+"/batch")
			}
		})
	}
}
