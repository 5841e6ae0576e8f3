package dynamo_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/internal/ddbcount"
	"github.com/idemkit/idem/internal/ddblocal"
)

// benchGuard returns a guard over a store on a fresh DynamoDB Local table, and the API
// wrapper that counts its requests.
func benchGuard(b *testing.B) (*idem.Guard, *countingAPI) {
	b.Helper()
	client := ddblocal.Client(b)
	api := ddbcount.New(client)
	store, err := dynamo.New(api, ddblocal.NewTable(b, client))
	if err != nil {
		b.Fatal(err)
	}
	g, err := idem.New(store, "test", idem.WithScope("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return g, api
}

// reportRoundTrips reports the DynamoDB requests per operation since the last take.
func reportRoundTrips(b *testing.B, api *countingAPI) {
	total := 0
	for _, n := range api.Take() {
		total += n
	}
	b.ReportMetric(float64(total)/float64(b.N), "roundtrips/op")
}

type benchResult struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

// BenchmarkNewKey is the claim and complete path: two round trips.
func BenchmarkNewKey(b *testing.B) {
	g, api := benchGuard(b)
	ctx := context.Background()
	fn := func(context.Context) (benchResult, error) { return benchResult{OrderID: "o-1", Amount: 1299}, nil }
	api.Take()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := idem.Do(ctx, g, idem.Request{Key: "new-" + strconv.Itoa(i)}, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRoundTrips(b, api)
}

// BenchmarkReplay is the completed-key path: one round trip.
func BenchmarkReplay(b *testing.B) {
	g, api := benchGuard(b)
	ctx := context.Background()
	fn := func(context.Context) (benchResult, error) { return benchResult{OrderID: "o-1", Amount: 1299}, nil }
	if _, _, err := idem.Do(ctx, g, idem.Request{Key: "replayed"}, fn); err != nil {
		b.Fatal(err)
	}
	api.Take()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, replayed, err := idem.Do(ctx, g, idem.Request{Key: "replayed"}, fn); err != nil || !replayed {
			b.Fatal(replayed, err)
		}
	}
	b.StopTimer()
	reportRoundTrips(b, api)
}
