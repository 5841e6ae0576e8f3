// Package redisstoretest runs Redis for the tests of code guarded by idem on the Redis
// store, as package dynamotest does for DynamoDB: a few lines in a test, and the real
// store answers on 127.0.0.1.
//
//	store := redisstoretest.NewStore(t) // a key prefix of the test's own
//	guard, err := idem.New(store, "render-report",
//		idem.WithMaxResultSize(redisstore.DefaultMaxRecordSize))
//
// [Main], called from TestMain, starts one redis-server (Redis or Valkey 7 or newer, found
// on the PATH; Debian's package is redis-server) for the test binary, on a free port of
// 127.0.0.1 only and without persistence, and stops it by its process id when the tests
// end; the kernel stops it too if the binary dies first. If REDIS_URL is set ([EnvURL]),
// that server is used instead and nothing is started.
//
// Each test is isolated: [NewStore] gives its store a key prefix of its own, and deletes
// the keys under it when the test ends, so two tests that use the same idempotency key
// never see each other's records, on a server the binary started or on one REDIS_URL names
// (which then holds the tests' keys only while they run).
//
// When no server can be had (redis-server is not installed and REDIS_URL is not set), the
// tests that ask for one skip, and fail instead when IDEM_REQUIRE_REDIS is set
// ([EnvRequire]); [Main] then fails the binary at once. Examples cannot skip: without a
// server, Main leaves them out.
package redisstoretest
