package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgtest"
)

// BenchmarkBatchOfTen records ten new keys, each with an attached write (an INSERT of an
// order) or none, through the guard's batch (one claim statement, then one completion
// statement, or one transaction for those with writes) and through ten calls of Do, one
// after another, on the test server in pgx's default mode. One op is the ten keys;
// statements/op counts what the store sent, BEGIN and COMMIT included.
func BenchmarkBatchOfTen(b *testing.B) {
	for _, attach := range []bool{false, true} {
		for _, batched := range []bool{true, false} {
			b.Run(fmt.Sprintf("attached=%t/batch=%t", attach, batched), func(b *testing.B) {
				ctx := context.Background()
				pool := pgtest.Pool(b)
				c := newCounter(pool)
				table, orders := pgtest.Name("idem"), pgtest.Name("orders")
				if err := pgstore.CreateTable(ctx, pool, table); err != nil {
					b.Fatal(err)
				}
				if _, err := pool.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`); err != nil {
					b.Fatal(err)
				}
				s, err := pgstore.New(c, table)
				if err != nil {
					b.Fatal(err)
				}
				g, err := idem.New(s, "bench", idem.WithScope("test"))
				if err != nil {
					b.Fatal(err)
				}
				handler := func(key string) func(context.Context) (out, error) {
					return func(ctx context.Context) (out, error) {
						if !attach {
							return out{N: 1}, nil
						}
						return out{N: 1}, pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
							_, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id) VALUES ($1)`, key)
							return err
						})
					}
				}
				c.take()
				b.ReportAllocs()
				b.ResetTimer()
				for n := range b.N {
					// A deadline within the lease, as Lambda's: outcomes wait for Settle.
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					reqs := make([]idem.Request, 10)
					for i := range reqs {
						reqs[i] = idem.Request{Key: fmt.Sprint(n, "-", i)}
					}
					if batched {
						bt := g.Claim(cctx, reqs)
						for i, r := range reqs {
							if _, _, err := idem.DoClaimed(cctx, bt, i, handler(r.Key)); err != nil {
								b.Fatal(err)
							}
						}
						for _, err := range bt.Settle(cctx) {
							if err != nil {
								b.Fatal(err)
							}
						}
					} else {
						for _, r := range reqs {
							if _, _, err := idem.Do(cctx, g, r, handler(r.Key)); err != nil {
								b.Fatal(err)
							}
						}
					}
					cancel()
				}
				b.StopTimer()
				total := 0
				for _, k := range c.take() {
					total += k
				}
				b.ReportMetric(float64(total)/float64(b.N), "statements/op")
			})
		}
	}
}
