// Package redisstore is the Redis [idemstore.Store], for Redis 7 or newer and Valkey, standalone
// or in cluster mode (which ElastiCache Serverless speaks; the tests here run a local
// standalone server and a local three-master cluster): one hash per idempotency key and
// one Lua script per state change, so any number of Lambda instances can share a
// server and a key's handler still runs at most once. Teams pick it for latency, and for
// results beyond DynamoDB's 400 KB item limit (see [WithMaxRecordSize]).
//
// It lives in a module of its own (github.com/idemkit/idem/redisstore), so a DynamoDB-only
// user of idem never downloads a Redis client, and its package name differs from the
// client's (redis), so a program that imports both needs no alias.
//
// # Mental model
//
// A record moves from absent to INPROGRESS (claimed under a lease) to COMPLETED (the stored
// result) and, at its expiry, back to absent, as with the DynamoDB store. Each move is one
// script that runs atomically on the server (EVALSHA, with EVAL when the server does not
// have the script yet). The claim reads the record and, in the same step, writes the new
// one if nothing holds the key, or returns the record that holds it: a replay or an
// in-flight refusal costs one round trip. Completion, release, lease extension and
// checkpoints are conditional on the random lease token the claim wrote (fencing): a
// worker whose lease ended and was taken over gets [idem.ErrLeaseLost] and never
// overwrites the new owner's record. Each script touches one key, the record's, so in
// cluster mode it runs on that key's slot and never needs a cross-slot script.
//
// A batch (idem.Guard.Claim, as the sqs package's batch claims use it) sends the same
// scripts for all of its records in one pipeline: its claims in one round trip, its
// completions in another, its releases in another. In cluster mode the client sends one
// pipeline to each node that holds some of the keys, concurrently. The scripts are atomic
// each, not together, so each record's outcome is exactly that of its single claim,
// completion or release, and a concurrent caller of one of the keys meets that record
// alone.
//
// # Time
//
// The claim decides with the caller's clock (the now [idem.Guard] passes), never the
// server's TIME, so that it agrees with the other stores and a test's fake clock drives
// it; leases already tolerate the skew between Lambda instances (idem.WithLeaseMargin).
// The server's clock only deletes: each write sets the key's expiry (PEXPIREAT) to the
// record's Expires plus a grace ([WithExpiryGrace], [DefaultExpiryGrace] of 5 minutes), so
// Redis frees the memory of expired records itself, on its own clock. A record the server
// has not deleted yet counts as absent to a claim once the caller's clock passes its
// Expires, so the grace changes nothing for claims: it holds memory longer, and a
// completion that comes after Expires still finds its record if nobody claimed it since,
// as in the other stores. It is there for a server clock ahead of the callers' by d: the
// server deletes a record at Expires + grace - d by their clock. With d up to the grace,
// that is never before Expires, and nothing changes. With d beyond it, the record vanishes
// d - grace before its Expires: the idempotency window ends that much early, and a lease
// that would run into that span ends when the record vanishes. A heartbeat extends a lease
// up to its record's Expires, so a long-running handler's lease is then cut short and a
// second claim wins while the handler still runs. Keep the grace above the worst skew of
// the server's clock (a server clock behind the callers' only keeps records longer).
//
// # Durability
//
// Redis acknowledges a write before it is on disk unless told otherwise. A restart of a
// server without persistence, or a failover to a replica that had not yet received the last
// writes (replication is asynchronous, in ElastiCache too), forgets records, and a
// forgotten key runs again (a lost claim lets a second caller run beside the first, a lost
// checkpoint makes the next owner resume from an earlier one): within the idempotency
// window the promise holds only as long as the records do. For the strongest form use the
// append-only file with appendfsync always (self-run Redis; a killed and restarted server
// then replays every result it acknowledged, as the tests show), or accept that a failover
// reopens the keys written in its last moments. The DynamoDB store has no such window.
//
// # Cancellation and cost
//
// Every method returns once its context ends, as the [idemstore.Store] contract asks (the
// guard cancels a lease extension in flight and waits for it). go-redis ends a command at
// its context's deadline only (with ContextTimeoutEnabled), never at a cancellation, so a
// call whose context can end runs its command in a goroutine of its own and leaves it to
// finish when the context ends first; the connection is never handed to another command
// with the late reply unread. That goroutine is most of the store's cost over raw
// commands: about 18 µs a command on the benchmark machine (BENCHMARKS.md, issue 27). A
// call with a context that cannot end (context.Background) runs the command directly.
//
// # Attached writes
//
// There are none: Redis cannot commit a write elsewhere atomically with the record, so
// [idem.Attach] refuses every write at once, in the handler, with an error wrapping
// [ErrAttachUnsupported] and idemstore.ErrInvalidAttach ([Store.CheckAttached]); a handler
// that returns it releases the key, and the work runs again on a retry. Make
// the handler's own effects idempotent, or use the DynamoDB store's transactional
// completion.
//
// # Usage
//
//	opts, err := redis.ParseURL(os.Getenv("REDIS_URL")) // redis://host:6379/0
//	// ...
//	client := redis.NewClient(opts)
//	// ...
//	store, err := redisstore.New(client)
//	// ...
//	guard, err := idem.New(store, "render-report",
//		// The guard's own limit defaults to DynamoDB's 390 KiB: raise it to the store's.
//		idem.WithMaxResultSize(redisstore.DefaultMaxRecordSize))
//	// ...
//	rep, replayed, err := idem.Do(ctx, guard, idem.Request{Key: "report-2026-11"},
//		func(ctx context.Context) (report, error) {
//			return report{ID: "2026-11", Rows: make([]byte, 4<<20)}, nil
//		})
//
// Use redis.NewClusterClient for cluster mode, and any redis.UniversalClient; point the
// store at primaries, never at replicas (reads must see the last write).
//
// # Documentation
//
//   - Scripting with Lua (EVAL, EVALSHA, atomicity, keys in cluster mode):
//     https://redis.io/docs/latest/develop/interact/programmability/eval-intro/
//   - Key expiry (PEXPIREAT): https://redis.io/docs/latest/commands/pexpireat/
//   - Persistence (append-only file, appendfsync):
//     https://redis.io/docs/latest/operate/oss_and_stack/management/persistence/
//   - go-redis: https://redis.uptrace.dev/
package redisstore
