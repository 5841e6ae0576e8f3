// Package pgstoretest runs PostgreSQL for the tests of code guarded by idem on the
// PostgreSQL store, as package dynamotest does for DynamoDB: a few lines in a test, and the
// real store answers on 127.0.0.1.
//
//	pool := pgstoretest.Pool(t)            // a schema of the test's own
//	store := pgstoretest.NewStore(t, pool) // an idempotency table in it
//	guard, err := idem.New(store, "create-order")
//
// A test binary starts one PostgreSQL 15 or newer, on a free port of 127.0.0.1 only, when
// it first needs one ([Main], [URL], [Pool]), and stops it by its process id when the tests
// end ([Main]); as root it runs the server as the postgres (or nobody) user, since
// PostgreSQL refuses to run as root. It finds initdb and postgres on the PATH or in
// /usr/lib/postgresql/<version>/bin (Debian's postgresql package). If DATABASE_URL is set
// ([EnvURL]), that server is used instead and nothing is started.
//
// Each test is isolated: [Pool] gives it a schema of its own, created for it and dropped
// with everything in it when it ends, and the pool's connections create and find tables
// there first (search_path), so a handler's own tables (orders, say) need no unique names.
// [NewStore] creates an idempotency table with a name of its own. So two tests that use the
// same idempotency key never see each other's records, on a server the binary started or
// on one DATABASE_URL names, which must then let the user create schemas.
//
// When no server can be had (PostgreSQL is not installed and DATABASE_URL is not set), the
// tests that ask for one skip, and fail instead when IDEM_REQUIRE_POSTGRES is set
// ([EnvRequire]), so a CI run that must include them cannot leave them out unseen.
// Examples cannot skip: [Main] leaves them out then (see [Open]).
package pgstoretest
