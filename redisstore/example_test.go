package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redisstore"
)

type report struct {
	ID   string `json:"id"`
	Rows []byte `json:"rows"`
}

// A guarded handler renders a report at most once per idempotency key; every retry gets
// the first rendering back, even one of several megabytes.
func Example() {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL")) // redis://host:6379/0
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	store, err := redisstore.New(client)
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "render-report",
		// The guard's own limit defaults to DynamoDB's 390 KiB: raise it to the store's.
		idem.WithMaxResultSize(redisstore.DefaultMaxRecordSize))
	if err != nil {
		log.Fatal(err)
	}
	rep, replayed, err := idem.Do(ctx, guard, idem.Request{Key: "report-2026-11"},
		func(ctx context.Context) (report, error) {
			return report{ID: "2026-11", Rows: make([]byte, 4<<20)}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.ID, len(rep.Rows), replayed)
}

// A cluster client works as it is: every script touches one key.
func ExampleNew_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{"node-1:6379", "node-2:6379", "node-3:6379"},
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithKeyPrefix("orders-api:idem:"))
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// Records are the hashes under RedisKey: HGETALL shows one, and SCAN MATCH prefix*
// lists them.
func ExampleStore_RedisKey() {
	store, err := redisstore.New(redis.NewClient(&redis.Options{}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(store.RedisKey("create-order.api#9f86d081"))
	// Output: idem:create-order.api#9f86d081
}

// A limit for a shared server: records (results included) over 1 MiB are refused by the
// store, and the guard records the completion without the result.
func ExampleWithMaxRecordSize() {
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL")) // redis://host:6379/0
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithMaxRecordSize(1<<20))
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "export", idem.WithMaxResultSize(1<<20))
	if err != nil {
		log.Fatal(err)
	}
	_ = guard
}

// A server whose clock may run up to 15 minutes ahead of the functions' clocks: the server
// deletes records 15 minutes after their expiry instead of 5, so it never deletes one
// before its expiry by the functions' clocks.
func ExampleWithExpiryGrace() {
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL")) // redis://host:6379/0
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithExpiryGrace(15*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}
