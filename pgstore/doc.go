// Package pgstore is the PostgreSQL [idemstore.Store], on the pgx v5 driver: one row per
// idempotency key in one table, every state change one statement conditional on the key's
// state, so any number of functions can share the table and a key's handler still runs at
// most once. It lives in a Go module of its own (github.com/idemkit/idem/pgstore), so a
// DynamoDB-only user never downloads pgx, and its name does not clash with pgx's packages.
//
// # Mental model
//
// A record moves from absent to INPROGRESS (claimed under a lease) to COMPLETED (the stored
// result) and, after its expiry, back to absent, exactly as with the DynamoDB store. The
// claim is one INSERT ... ON CONFLICT (id) DO UPDATE whose WHERE lets it replace only an
// expired record, or an in-progress one whose lease has ended and whose checkpoint the
// claim carries. The same statement returns the record that refused the claim. In pgx's
// default mode it first reads the key in the statement's snapshot, without a lock: a
// record there that refuses the claim (completed, a live lease, a checkpoint the claim does
// not carry) is the answer, and the upsert inserts nothing, so a replay or an in-flight
// refusal takes no row lock and no transaction ID, as a plain read does (READ COMMITTED's
// snapshot is taken when the statement starts, so the answer is the key's committed state
// within the call). Otherwise the upsert runs, and when it changed nothing a second read of
// the key, FOR SHARE, returns the row as the upsert judged it (the snapshot's, claimable,
// can be older). In the modes that parse and plan every statement (exec mode, the simple
// protocol) the first read would cost more than the lock it saves, and the claim (a
// batch's too) is the upsert and the FOR SHARE read alone. It locks so in every mode where
// the session's commits wait for a synchronous standby, and with [WithLockingClaims] (see
// Durability). So a replay and an in-flight refusal cost one statement each. Only when the
// refusing record was created after the statement began (two first claims of one key at
// once) is it out of the statement's sight; the claim is then sent once more.
//
// Batches (the guard's batch claims, SQS batches) take the same statements for many keys
// at once: the records travel as one array per column, unnested into rows, so a batch's
// claims are one statement whose refused rows come back from it, its completions one, its
// releases one, and its completions with attached writes one transaction. Each statement
// takes its rows' locks in key order, so two batches over the same keys wait for each
// other rather than deadlock (attached writes take their own locks in their own order).
//
// Completion, release, lease extension and checkpoints are conditional on the random lease
// token written by the claim (fencing): a worker whose lease ran out and was taken over
// changes nothing, and learns so from [idem.ErrLeaseLost]. Expiry is judged at read time
// with the caller's clock, so an expired row counts as absent whether or not it has been
// deleted; [DeleteExpiredStatement] is the housekeeping to schedule (with pg_cron, say).
//
// # Business writes in the completion's transaction
//
// [Attach] is the PostgreSQL counterpart of dynamo.Attach: the handler attaches functions of
// a pgx.Tx, and when it returns, the store runs one transaction: the UPDATE that completes
// the record (conditional on the lease token and on the record being in progress), then
// the attached functions with that transaction, then COMMIT. The business rows and the
// COMPLETED record commit together or not at all. A fenced-off owner's UPDATE matches no
// row, so its transaction rolls back before its functions even run. The functions must
// not end the transaction themselves (no COMMIT or ROLLBACK, no transaction begun on
// tx.Conn()); the store checks that they did not, and [Attach] says what it reports if one
// did.
//
// The writes are deferred to the completion rather than made in a transaction opened at the
// claim and held across the handler, for three reasons. A held transaction would keep a
// pooled connection, and the row locks of whatever the handler wrote, for the handler's
// whole run, including its calls to other services: behind RDS Proxy or PgBouncer that is a
// server connection pinned per in-flight request, exactly what the proxy is there to
// avoid, and long-held locks stall other writers. The guard hands attached writes to
// [idemstore.Store.Complete] and nowhere else: on a handler error, a panic, a lost lease or a
// crash they are simply dropped, where an open transaction would have to be found and rolled
// back on every one of those paths (a crashed Lambda leaves it to the server's idle
// timeout). And the transaction lasts only as long as its statements, which is all a claim
// of the same key waits for (the completion holds the record's row lock until COMMIT). The
// cost: the handler cannot read its own writes before it returns, nor put
// values the database generates (serial ids) into its result, because the result is
// recorded with them. Generate ids in Go (UUIDs), and make reads that decide something
// inside the attached function, where returning an error rolls everything back.
//
// # Usage
//
//	store, err := pgstore.New(pool, pgstore.DefaultTable)
//	// ...
//	guard, err := idem.New(store, "create-order")
//	// ...
//	req := idem.Request{Key: "order-7f3a"}
//	o, replayed, err := idem.Do(ctx, guard, req, func(ctx context.Context) (order, error) {
//		o := order{ID: "ord-42", Amount: 1250}
//		err := pgstore.Attach(ctx, func(ctx context.Context, tx pgx.Tx) error {
//			_, err := tx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ($1, $2)`,
//				o.ID, o.Amount)
//			return err
//		})
//		return o, err
//	})
//
// The table is the one [Schema] describes; [CreateTable] makes it for tests and local runs.
// A table made by a version of schema 1 needs [UpgradeStatement] first.
//
// # Durability
//
// At most once holds only while every write PostgreSQL reported committed stays: a lost
// claim lets a second caller run the handler beside the first, a lost completion lets a
// retry run it again, a lost checkpoint makes the next owner resume from an earlier one.
// Attached writes share the completion's transaction, so they are lost with the record,
// never apart from it; but the caller was already answered, and the retry runs the
// handler again. A single server with the defaults (fsync and synchronous_commit on)
// loses nothing it acknowledged. What loses commits:
//
//   - synchronous_commit off, for the server, the database, the role or the pool's
//     sessions: a crash loses the commits of its last moments (up to three times
//     wal_writer_delay), and their keys run again, as the package's tests show;
//     fsync off loses more, on a crash of the machine.
//   - A failover to a standby that had not confirmed every commit: asynchronous streaming
//     replication (no synchronous_standby_names, or synchronous_commit local), or a read
//     replica promoted by hand. What the old primary committed last is gone.
//
// Point the store at the primary, with synchronous replication where a failover must
// not reopen keys, or accept that a crash or failover may run the handlers of its last
// moments' keys again.
//
// A replay is as durable as the claim that answers it. A claim that locks the record
// takes a transaction ID, and its commit flushes the WAL up to it (and waits for the
// synchronous standbys) as its session's synchronous_commit says; every commit before it,
// the replayed completion's included, is then as durable. A claim answered from its
// snapshot commits nothing, and the completion it replays is as durable as its writer made
// it. The store picks the snapshot only where the two are alike:
//
//   - With synchronous standbys configured (synchronous_standby_names not empty) and the
//     claim's session at synchronous_commit on, remote_write or remote_apply, every claim
//     locks: a completion whose wait for the standby was cancelled (statement_timeout, a
//     cancel) is visible, committed locally only, and a failover loses it; the locking
//     claim waits for the standby's confirmation. The server judges this on each claim.
//   - A writer of the table whose sessions commit with synchronous_commit off, where the
//     store's own are on, is out of the store's sight: give every store that reads the
//     table [WithLockingClaims], or a retry may be answered from a completion that a crash
//     then loses, and a later retry run the key again. A store whose own sessions are off
//     gains nothing by it: its claim's commit flushes nothing either.
//
// The option, on each store:
//
//	store, err := pgstore.New(pool, pgstore.DefaultTable, pgstore.WithLockingClaims())
//
// # RDS Proxy, PgBouncer and prepared statements
//
// The store keeps no session state: no SET, no temporary tables, no advisory locks, no
// LISTEN; every operation is one statement in its own implicit transaction, or the one
// short completion transaction. It runs behind a transaction-mode pooler such as RDS Proxy
// or PgBouncer. What pins there is pgx's own default: QueryExecModeCacheStatement prepares
// named statements on each connection and caches them, session state a pooler must either
// track or pin the client connection for. Configure the pool to send unnamed statements,
// still one round trip each:
//
//	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
//	// ...
//	// No named prepared statements: RDS Proxy does not pin.
//	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//
// (QueryExecModeSimpleProtocol also works.) The price is that the server parses and plans
// every statement: on the benchmark machine (lab/cmd/idem-bench -store postgres) a new key cost
// about three times the server CPU of the default mode. Without a pooler, keep the default.
// In it, the store's statements are planned once per connection: the check that travels
// with a completion's COMMIT too, a statement the store prepares on the connection the
// first time (through a *pgxpool.Pool or *pgx.Conn; through a wrapper of either only if it
// has their Config method) and runs with EXECUTE.
// Every parameter in the store's SQL carries an explicit cast, so the statements need no
// server-side description in any mode; the behaviour suite runs in the default mode,
// QueryExecModeExec and QueryExecModeSimpleProtocol. In Lambda, create the pool once per
// execution environment (outside the handler) and keep MaxConns small: each concurrent
// invocation needs one connection at a time.
//
// # Documentation
//
//   - INSERT ... ON CONFLICT:
//     https://www.postgresql.org/docs/current/sql-insert.html#SQL-ON-CONFLICT
//   - Row locks and READ COMMITTED:
//     https://www.postgresql.org/docs/current/transaction-iso.html#XACT-READ-COMMITTED
//   - MERGE (release):
//     https://www.postgresql.org/docs/current/sql-merge.html
//   - Asynchronous commit:
//     https://www.postgresql.org/docs/current/wal-async-commit.html
//   - Synchronous replication:
//     https://www.postgresql.org/docs/current/warm-standby.html#SYNCHRONOUS-REPLICATION
//   - RDS Proxy pinning:
//     https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-proxy-pinning.html
//   - pgx query exec modes:
//     https://pkg.go.dev/github.com/jackc/pgx/v5#QueryExecMode
//   - pg_cron:
//     https://github.com/citusdata/pg_cron
package pgstore
