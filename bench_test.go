package idem_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
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
