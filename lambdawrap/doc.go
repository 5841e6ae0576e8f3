// Package lambdawrap makes AWS Lambda handlers idempotent with one decorator.
// The decorator goes around the handler already passed to lambda.Start:
//
//   - [Wrap] for any event type;
//   - [HTTPAPI], [REST], [FunctionURL] and [ALB] for HTTP requests through API Gateway,
//     function URLs and load balancers.
//
// [LocalHandler] serves an HTTP API, REST API or load balancer handler on localhost, for
// development and tests.
//
// # Mental model
//
// A decorator finds the request's idempotency key and hands the handler to an [idem.Guard].
// The guard runs the handler at most once per key and stores its result. Every retry or
// duplicate gets that result back instead of a second run.
//
//   - [Wrap] takes the key from a function of the event. [KeyFromJMESPath] builds one from
//     an expression, as the Powertools utilities do.
//   - The HTTP decorators take the key from the Idempotency-Key header. They store the
//     whole response: status, headers, cookies, body and its base64 flag. A replay is the
//     same response byte for byte, plus "Idempotent-Replayed: true".
//
// The four event shapes share one implementation. Package idemhttp uses it too, for plain
// net/http handlers. The lease on a key ends at the invocation's deadline plus the guard's
// margin. So the retry of a timed-out invocation can run again soon after.
//
// # HTTP semantics
//
// The HTTP decorators follow the IETF draft "The Idempotency-Key HTTP Header Field".
// Each case gets one answer:
//
//   - A guarded method (POST, PATCH; see [WithMethods]) without a key: 400.
//     With WithKeyRequired(false), the handler runs unguarded instead, and is reported.
//   - A key that is empty, over 255 characters or not printable ASCII: 400.
//     So is a header with two different values.
//   - The same key while its request is in flight: 409 with Retry-After (seconds).
//   - The same key with another method, path, query string or body: 422.
//   - The same key, completed: the stored response, plus Idempotent-Replayed: true.
//   - The handler returns 5xx, 409 or 429 (see [WithCacheable]): that response.
//     Nothing is stored, and the key is released.
//   - The handler returns an error: the error goes to Lambda. Nothing is stored.
//   - The handler returns idem's lost lease or store failure: 409 or 503 with Retry-After,
//     as elsewhere. The key is released.
//   - The handler returns a zero response (no status code): 503 with Retry-After.
//     Nothing is stored, and the key is released.
//   - The store is unavailable before the handler runs: 503 with Retry-After.
//     The handler does not run.
//   - The request is authenticated but carries no caller identity (see below): 500.
//     The handler does not run.
//   - The handler ran, and the store committed nothing of its outcome: 503 with
//     Retry-After. The key is released, and a retry runs the handler again.
//   - The handler ran, and the store refused an attached write's condition: 409. Nothing
//     is stored, and the key is released. For a refusal for good, [WithRefused] answers
//     as the handler's author chooses instead, stored and replayed like a handler's 4xx.
//   - The handler ran, and the store failed to record its outcome: the handler's response.
//     The failure is logged at ERROR (see below).
//   - The same, with attached writes and the record unreadable: 503 with Retry-After.
//     The outcome is unknown.
//   - Other methods (GET, PUT, DELETE, ...): the handler runs unguarded.
//
// A store failure is answered by what it means for the client:
//
//   - Before the handler runs, the request was not processed: 503 [ProblemStoreUnavailable].
//   - After it ran, the store may refuse the completion as a whole: neither the record nor
//     the writes attached to it committed
//     ([github.com/idemkit/idem/idemstore.ErrNotCommitted]). The key was released, and a
//     retry runs the handler again: 503 [ProblemNotCommitted].
//   - If the completion failed otherwise, the handler's effects happened, but the store may
//     not say so. The client gets the handler's own response, since a 503 would claim that
//     nothing ran. The guard logs the failure at ERROR. Until the lease ends, a retry gets
//     409; after it, a retry may run the handler again.
//   - The exception is a handler that attached its writes to the completion ([idem.Attach]).
//     When the store fails and the record cannot be read back, those writes may not have
//     committed. The handler's response (an order id, say) may then describe nothing. So
//     the client gets 503 [ProblemOutcomeUnknown]. A retry after the lease either replays
//     the committed response or runs the handler again.
//
// The header name is matched in any case, in single- and multi-value header maps. Its value
// may be an RFC 8941 quoted string, which is unquoted. Parameters are checked and ignored:
// `"k";v=1` is the key k. HTTP APIs and function URLs join a repeated header's values with
// commas. So a bare key containing a comma reads as two values and is refused; quote it.
// Errors are RFC 9457 problem details (application/problem+json). Their type is one of the
// Problem constants.
//
// A handler that meets an error of idem itself may simply return it. [idem.Checkpoint]
// may find its lease lost or the store failing. The error it returns is answered as
// anywhere else: 409 [ProblemLeaseLost] or 503 [ProblemStoreUnavailable] with Retry-After.
// The key is released.
//
// A handler's context ends at the invocation's deadline, or when its lease runs out (see
// idem.WithMaxLease). A handler may then give up, or give up under a deadline of its own
// (a downstream call's). It should return one of:
//
//   - an error (context.Cause(ctx)), which goes to Lambda with nothing stored;
//   - a zero response (no status code). That is no answer: API Gateway would answer a
//     status 0 with 502. So the decorator stores nothing, releases the key and answers 503
//     [ProblemAborted] with Retry-After, whether the handler's context ended or not. A retry
//     runs the handler again (TestZeroStatusIsNeverStored).
//
// A response with a status is the handler's answer and is stored like any other. A handler
// that gives up after doing part of its work leaves that part done: a retry runs it again.
// Writes attached to the completion ([idem.Attach]) commit only with it. So a run that gave
// up left none of them.
//
// The decorators log and report through their guard:
//
//   - Its logger (idem.WithLogger) gets what is answered rather than returned to Lambda:
//     a failing store, a response that cannot be replayed, a run without a key, a caller
//     it cannot identify. And every request refused or failed for a reason of idem's (in
//     flight, payload mismatch, lease lost, store down, …) gets one INFO line,
//     "lambdawrap: request refused", with its stored key, the reason and the status, from
//     which on-call finds its record (TestRefusalLogged); [Wrap] writes it for each such
//     error it returns.
//   - Its hooks (idem.WithHooks) get the guard's own events. They also get OnUnguarded for
//     every run without a key and every request refused for an unknown caller.
//
// Log lines and events name a request by its stored key (idem.Guard.StoredKey), never by the
// raw key, which may be personal data. Nor do the errors returned to Lambda carry it
// (TestRawKeyNeverLogged).
//
// # Options
//
// There are two kinds of option:
//
//   - An [HTTPOption] ([WithKeyRequired], [WithMethods], [WithCacheable], [WithHeader]) says
//     how a request is guarded, whatever its shape. Every HTTP decorator takes it.
//   - An [Option] ([WithTenant], [WithFingerprint], [WithFingerprintJMESPath]) reads the
//     event, so its type names the event type. [Wrap] and each HTTP decorator take only the
//     options of their own event type.
//
// A wrong option is a compile error, not a failure at start-up.
//
// The key is scoped by the caller's identity when the event carries one ([TenantREST],
// [TenantHTTPAPI], [TenantFunctionURL]). So the same key from two tenants is two records,
// and no tenant is ever replayed another's response. [WithTenant] overrides the identity.
//
//   - An IAM caller that assumed a role is the role, whatever its session name. So a
//     service retrying from another task, instance or container is the same tenant.
//   - A caller that API Gateway's mutual TLS authenticated is its client certificate's
//     subject under the certificate's issuer. So a renewed certificate is the same tenant.
//     An authorizer's identity comes before it.
//
// A request may be authenticated but carry no identity that the default tenant finds. Its
// event carries an authorizer, JWT or IAM block, or a client certificate. Such a request is
// refused with 500 [ProblemUnknownCaller], and the handler does not run. The refusal is
// logged at ERROR and reported through OnUnguarded with [ErrUnknownCaller]. Scoped by no
// one, every such caller would share one tenant. A second user who sent the first user's
// key would be replayed the first user's response. The usual cases need [WithTenant]:
//
//   - an HTTP API Lambda authorizer with simple responses whose context names the user
//     otherwise than principalId or sub ({"userId": ...});
//   - a JWT without a sub claim;
//   - an authorizer's numeric principalId or sub that a float64 may not hold exactly: an
//     integer beyond 2^53, or a fraction. aws-lambda-go decodes the authorizer's context
//     into float64s, and two 64-bit ids can arrive as one. Send such ids as strings;
//   - a client certificate without a subject DN.
//
// A request that carries no authentication at all is not scoped by caller.
//
// # Usage
//
//	store, err := dynamo.New(ddb, "idempotency")
//	...
//	guard, err := idem.New(store, "create-order")
//	...
//	handler, err := lambdawrap.HTTPAPI(guard, createOrder)
//	...
//	lambda.Start(handler)
//
// and for any other event, keyed by a field of it:
//
//	key, err := lambdawrap.KeyFromJMESPath[Payment]("payment_id")
//	...
//	handler, err := lambdawrap.Wrap(guard, processPayment, key)
//
// The API Gateway event shapes are documented at
// https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html
// and
// https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html.
// Function URLs are documented at
// https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html, and load balancers at
// https://docs.aws.amazon.com/elasticloadbalancing/latest/application/lambda-functions.html.
// The header is specified at
// https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/.
package lambdawrap
