package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

type benchResult struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return keys
}

// bytesCodec stores []byte results as they are, to measure the guard without a codec's
// cost.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "bytes" }

func (bytesCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, errors.New("bytesCodec: not []byte")
	}
	return b, nil
}

func (bytesCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("bytesCodec: not *[]byte")
	}
	*p = append((*p)[:0], data...)
	return nil
}

// freshStoreEvery is how many new keys a benchmark writes into one in-memory store.
const freshStoreEvery = 10_000

func BenchmarkGuard(b *testing.B) {
	ctx := context.Background()
	ok := func(context.Context) (benchResult, error) { return benchResult{OK: true, ID: "abc"}, nil }

	b.Run("NewKey", func(b *testing.B) {
		keys := benchKeys(b.N)
		var g *idem.Guard
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if i%freshStoreEvery == 0 {
				// A store of millions of records would measure the map's growth and the
				// garbage collector scanning it, not the guard: start a fresh one, untimed.
				b.StopTimer()
				g, _ = idem.New(memstore.New(), "test")
				b.StartTimer()
			}
			if _, _, err := idem.Do(ctx, g, idem.Request{Key: keys[i]}, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	// NewKeyDeadline is NewKey with a context deadline within DefaultMaxLease, as every
	// Lambda invocation has: the lease then outlasts the context, and no lease watchdog
	// (a goroutine and its timer, which NewKey pays for) runs.
	b.Run("NewKeyDeadline", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		keys := benchKeys(b.N)
		var g *idem.Guard
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if i%freshStoreEvery == 0 {
				b.StopTimer()
				g, _ = idem.New(memstore.New(), "test")
				b.StartTimer()
			}
			if _, _, err := idem.Do(ctx, g, idem.Request{Key: keys[i]}, ok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Replay", func(b *testing.B) {
		g, _ := idem.New(memstore.New(), "test")
		_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, ok)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, ok); err != nil || !replayed {
				b.Fatal(err)
			}
		}
	})
	// ReplayNoCodec is Replay with a codec that only copies bytes: the guard's own replay
	// path, without the JSON decoding that Replay pays for its result type.
	b.Run("ReplayNoCodec", func(b *testing.B) {
		g, _ := idem.New(memstore.New(), "test", idem.WithCodec(bytesCodec{}))
		raw := func(context.Context) ([]byte, error) { return []byte(`{"ok":true,"id":"abc"}`), nil }
		_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, raw)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, raw); err != nil || !replayed {
				b.Fatal(err)
			}
		}
	})
	b.Run("CacheHit", func(b *testing.B) {
		g, _ := idem.New(memstore.New(), "test", idem.WithCache(1024))
		_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, ok)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, ok); err != nil || !replayed {
				b.Fatal(err)
			}
		}
	})
	b.Run("InFlight", func(b *testing.B) {
		g, _ := idem.New(memstore.New(), "test")
		release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, func(context.Context) (benchResult, error) {
				close(started)
				<-release
				return benchResult{}, nil
			})
		}()
		<-started
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, _, err := idem.Do(ctx, g, idem.Request{Key: "k"}, ok); err == nil {
				b.Fatal("expected in-progress")
			}
		}
		b.StopTimer()
		close(release)
		<-done
	})
}

// BenchmarkResultCodec stores and replays results of 1 KB, 50 KB and 300 KB of JSON through
// the guard's encode (compressing) and decode path.
func BenchmarkResultCodec(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1 << 10, 50 << 10, 300 << 10} {
		item := `{"sku":"SKU-000123","quantity":3,"price_cents":1999},`
		payload := strings.Repeat(item, size/len(item)+1)[:size]
		for _, compress := range []bool{true, false} {
			name := strconv.Itoa(size>>10) + "KB/gzip=" + strconv.FormatBool(compress)
			threshold := idem.DefaultCompressionThreshold
			if !compress {
				threshold = 1 << 30
			}
			b.Run("Encode/"+name, func(b *testing.B) {
				g, _ := idem.New(memstore.New(), "test", idem.WithCompression(threshold))
				keys := benchKeys(b.N)
				fn := func(context.Context) (string, error) { return payload, nil }
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, _, err := idem.Do(ctx, g, idem.Request{Key: keys[i]}, fn); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Decode/"+name, func(b *testing.B) {
				g, _ := idem.New(memstore.New(), "test", idem.WithCompression(threshold))
				fn := func(context.Context) (string, error) { return payload, nil }
				_, _, _ = idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					v, replayed, err := idem.Do(ctx, g, idem.Request{Key: "k"}, fn)
					if err != nil || !replayed || len(v) != size {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// orderLines returns a JSON result of about size bytes: order lines with varied SKUs,
// quantities and prices, so it compresses like real data rather than like one repeated
// line.
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

type orderLine struct {
	SKU        string `json:"sku"`
	Quantity   int    `json:"quantity"`
	PriceCents int    `json:"price_cents"`
	Warehouse  string `json:"warehouse"`
}

// itemSize is the DynamoDB size of a completed record's item with the default attribute
// names: attribute name lengths plus value sizes (strings and binary by their bytes,
// numbers about one byte per two digits plus one).
func itemSize(rec *idemstore.Record) int {
	num := func(v int64) int { return len(strconv.FormatInt(v, 10))/2 + 1 }
	size := len("id") + len(rec.Key) +
		len("status") + len(rec.Status) +
		len("v") + num(int64(rec.Version)) +
		len("expiration") + num(rec.Expires.Unix()) +
		len("lease_token") + len(rec.LeaseToken)
	if rec.Encoding != "" {
		size += len("enc") + len(rec.Encoding)
	}
	if rec.Data != nil {
		size += len("data") + len(rec.Data)
	}
	return size
}

// BenchmarkResultUnits stores results of 1, 50 and 300 KB of JSON order lines through the
// guard, with compression at its default threshold and turned off, and reports the write
// units the completed item costs (ceil(size / 1 KB)) and the stored bytes. A 300 KB result
// uncompressed still fits DynamoDB's 400 KB item. One op is one new key.
//
//	go test -run '^$' -bench ResultUnits .
func BenchmarkResultUnits(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1 << 10, 50 << 10, 300 << 10} {
		result := orderLines(size)
		raw, _ := json.Marshal(result)
		for _, compress := range []bool{true, false} {
			threshold := idem.DefaultCompressionThreshold
			if !compress {
				threshold = 1 << 30
			}
			b.Run(fmt.Sprintf("%dKB/gzip=%t", size>>10, compress), func(b *testing.B) {
				store := memstore.New()
				g, err := idem.New(store, "test", idem.WithCompression(threshold), idem.WithScope("bench"))
				if err != nil {
					b.Fatal(err)
				}
				fn := func(context.Context) ([]orderLine, error) { return result, nil }
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				var last string
				for i := 0; b.Loop(); i++ {
					last = "k" + strconv.Itoa(i)
					if _, _, err := idem.Do(ctx, g, idem.Request{Key: last}, fn); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				key, _ := g.StoredKey(idem.Request{Key: last})
				rec, err := store.Get(ctx, key)
				if err != nil || rec == nil {
					b.Fatal("no record", err)
				}
				got, replayed, err := idem.Do(ctx, g, idem.Request{Key: last}, fn)
				if err != nil || !replayed || len(got) != len(result) {
					b.Fatal("replay failed", err)
				}
				size := itemSize(rec)
				b.ReportMetric(float64(size), "item_bytes")
				b.ReportMetric(float64((size+1023)/1024), "WCU")
				b.ReportMetric(float64(len(raw)), "json_bytes")
			})
		}
	}
}
