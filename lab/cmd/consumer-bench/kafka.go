package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/kafkaconsumer"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
)

const kafkaTopic = "orders"

// runKafka measures Kafka consumers on kfake, franz-go's in-process cluster: records keyed
// by account, each with the outbox's Idempotency-Key header (its event id) and a 256-byte
// body.
func runKafka(ctx context.Context, pg *postgres, cfg config, enc *json.Encoder) error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(cfg.partitions), kafkaTopic))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	if err := produceKafka(ctx, brokers, cfg); err != nil {
		return err
	}
	for round := 1; round <= cfg.rounds; round++ {
		designs := []string{"idem", "processed_events"}
		if round%2 == 0 {
			designs[0], designs[1] = designs[1], designs[0]
		}
		for _, design := range designs {
			sfx := suffix(design, round)
			orders, events, err := pg.tables(ctx, sfx)
			if err != nil {
				return err
			}
			var guard *idem.Guard
			if design == "idem" {
				if guard, err = pgGuard(ctx, pg, "idem_"+sfx); err != nil {
					return err
				}
			}
			for _, pass := range []string{"new", "redelivered"} {
				group := design + "-" + pass + "-" + sfx
				r := result{
					Broker: "kafka", Design: design, Pass: pass, Round: round, Records: cfg.records,
					Partitions: cfg.partitions, Concurrency: cfg.concurrency, Keys: cfg.keys, BatchClaims: cfg.batchClaims,
					BusinessWritesWanted: cfg.records,
				}
				var consume func() error
				var closeFn func()
				if design == "idem" {
					consume, closeFn, err = idemKafka(ctx, guard, brokers, group, orders, cfg)
				} else {
					consume, closeFn, err = handKafka(ctx, pg, brokers, group, orders, events, cfg)
				}
				if err != nil {
					return err
				}
				r, err = pg.measure(r, orders, consume)
				closeFn()
				if err != nil {
					return err
				}
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// produceKafka writes the run's records.
func produceKafka(ctx context.Context, brokers []string, cfg config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	body := []byte(strings.Repeat("x", 256))
	recs := make([]*kgo.Record, cfg.records)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: kafkaTopic, Key: []byte("acct-" + strconv.Itoa(i%cfg.keys)), Value: body,
			Headers: []kgo.RecordHeader{{Key: outbox.IDAttribute, Value: []byte("evt-" + strconv.Itoa(i))}},
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// pgGuard returns a guard over a new pgstore table.
func pgGuard(ctx context.Context, pg *postgres, table string) (*idem.Guard, error) {
	if err := pgstore.CreateTable(ctx, pg.pool, table); err != nil {
		return nil, err
	}
	store, err := pgstore.New(pg.pool, table)
	if err != nil {
		return nil, err
	}
	return idem.New(store, "consumer-bench")
}

// idemKafka returns a pass of kafkaconsumer over guard: the handler attaches the business
// write to the completion.
func idemKafka(ctx context.Context, guard *idem.Guard, brokers []string, group, orders string, cfg config) (func() error, func(), error) {
	c, err := kafkaconsumer.New(guard, func(ctx context.Context, r *kgo.Record) error {
		id, _ := kafkaconsumer.Header(r, outbox.IDAttribute)
		return pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id, body) VALUES ($1, $2)`, string(id), r.Value)
			return err
		})
	}, []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(kafkaTopic)},
		kafkaconsumer.WithConcurrency(cfg.concurrency), kafkaconsumer.WithMaxRecords(cfg.batch),
		kafkaconsumer.WithBatchClaims(cfg.batchClaims))
	if err != nil {
		return nil, nil, err
	}
	consume := func() error {
		done := 0
		for done < cfg.records {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			rep, err := c.Poll(pctx)
			cancel()
			if err != nil {
				return err
			}
			for _, o := range rep.Outcomes {
				if o.Failed() {
					return fmt.Errorf("record %s failed: %w", o.ID, o.Err)
				}
				done++
			}
		}
		return nil
	}
	return consume, c.Close, nil
}

// handKafka returns a pass of the hand-written consumer: franz-go polls, each partition's
// records run in order on a goroutine of their own through processed_events, and the
// offsets are committed after each poll.
func handKafka(ctx context.Context, pg *postgres, brokers []string, group, orders, events string, cfg config) (func() error, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(kafkaTopic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	if err != nil {
		return nil, nil, err
	}
	consume := func() error {
		done := 0
		for done < cfg.records {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			fetches := cl.PollRecords(pctx, cfg.batch)
			cancel()
			if err := fetches.Err(); err != nil {
				cl.AllowRebalance()
				return err
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var ferr error
			sem := make(chan struct{}, cfg.concurrency)
			fetches.EachPartition(func(p kgo.FetchTopicPartition) {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					for _, r := range p.Records {
						id, _ := kafkaconsumer.Header(r, outbox.IDAttribute)
						if err := pg.processedEvents(ctx, orders, events, string(id), r.Value); err != nil {
							mu.Lock()
							ferr = err
							mu.Unlock()
							return
						}
					}
				})
			})
			wg.Wait()
			if ferr != nil {
				cl.AllowRebalance()
				return ferr
			}
			done += fetches.NumRecords()
			err := cl.CommitUncommittedOffsets(ctx)
			cl.AllowRebalance()
			if err != nil {
				return err
			}
		}
		return nil
	}
	return consume, cl.Close, nil
}
