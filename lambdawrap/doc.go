// Package lambdawrap makes AWS Lambda handlers idempotent with one decorator around the
// handler already passed to lambda.Start: [Wrap] for any event type, and [HTTPAPI], [REST],
// [FunctionURL] and [ALB] for HTTP requests through API Gateway, function URLs and load
// balancers. [LocalHandler] serves an HTTP API, REST API or load balancer handler on
// localhost for development and tests.
//
// # Mental model
//
// A decorator finds the request's idempotency key and hands the handler to an [idem.Guard],
// which runs it at most once per key and stores its result; every retry or duplicate gets
// that result back instead of a second run. The generic [Wrap] takes the key from a function
// of the event ([KeyFromJMESPath] builds one from an expression, as the Powertools
// utilities do). The HTTP decorators take it from the Idempotency-Key header and store the
// whole response (status, headers, cookies, body and its base64 flag), so a replay is the
// same response byte for byte, plus "Idempotent-Replayed: true". The four event shapes share
// one implementation, which also serves plain net/http handlers in package idemhttp. The
// lease on a key ends at the invocation's deadline plus the guard's margin, so the retry of
// a timed-out invocation can run again soon after.
//
// # HTTP semantics
//
// Following the IETF draft "The Idempotency-Key HTTP Header Field":
//
//	situation                                              response
//	guarded method (POST, PATCH; see WithMethods), no key  400, or unguarded (and reported) if not WithKeyRequired
//	key empty, over 255 characters, not printable ASCII,   400
//	  or two different values for the header
//	same key, request in flight                            409 with Retry-After (seconds)
//	same key, other method, path, query string or body     422
//	same key, completed                                    the stored response + Idempotent-Replayed: true
//	handler returns 5xx, 409, 429 (see WithCacheable)      that response; nothing stored, key released
//	handler returns an error                               the error, to Lambda; nothing stored
//	handler returns idem's lost lease or store failure     409 or 503 with Retry-After, as elsewhere; key released
//	handler's context ended, it returned a zero response   503 with Retry-After; nothing stored, key released
//	store unavailable before the handler ran               503 with Retry-After; the handler did not run
//	authenticated, but no caller identity (see below)      500; the handler did not run
//	handler ran, store committed nothing of its outcome    503 with Retry-After; key released, a retry runs again
//	handler ran, store failed to record its outcome        the handler's response, logged at ERROR (see below)
//	same, with attached writes and the record unreadable   503 with Retry-After; the outcome is unknown
//	other methods (GET, PUT, DELETE, ...)                  the handler, unguarded
//
// A store failure is answered by what it means for the client. Before the handler runs,
// the request was not processed: 503 [ProblemStoreUnavailable]. After it ran, if the store
// refused the completion as a whole
// ([github.com/idemkit/idem/idemstore.ErrNotCommitted]: neither the record nor the
// writes attached to it committed), the key was released and a retry runs the handler
// again: 503 [ProblemNotCommitted]. If the completion failed otherwise, the handler's
// effects happened but the store may not say so: the client gets the handler's own
// response, since a 503 would claim that nothing ran, and the guard logs the failure at
// ERROR. Until the lease ends a retry gets 409; after it, a retry may run the
// handler again. The exception is a handler that attached its writes to the completion
// ([idem.Attach]): when the store fails and the record cannot be read back, those writes
// may not have committed, so the handler's response (an order id, say) may describe
// nothing: the client gets 503 [ProblemOutcomeUnknown], and a retry after the lease either
// replays the committed response or runs the handler again.
//
// The header name is matched in any case, in single- and multi-value header maps; its value
// may be an RFC 8941 quoted string, which is unquoted, with or without parameters, which
// are checked and ignored (`"k";v=1` is the key k). HTTP APIs and function URLs join a
// repeated header's values with commas, so a bare key containing a comma reads as two
// values and is refused; quote it. Errors are RFC 9457 problem details
// (application/problem+json) whose type is one of the Problem constants.
//
// A handler that meets an error of idem itself may simply return it: when
// [idem.Checkpoint] finds its lease lost or the store failing, the error it returns is
// answered as the same error is anywhere else, 409 [ProblemLeaseLost] or 503
// [ProblemStoreUnavailable] with Retry-After, and the key is released.
//
// A handler's context ends at the invocation's deadline, or when its lease runs out (see
// idem.WithMaxLease). A handler that then gives up should return its context's error
// (context.Cause(ctx)), which goes to Lambda with nothing stored, or a zero response (no
// status code): that is no answer, so the decorator stores nothing, releases the key and
// answers 503 [ProblemAborted] with Retry-After, and a retry runs the handler again. A
// response with a status is the handler's answer and is stored like any other.
//
// The decorators log and report through their guard: its logger (idem.WithLogger) gets
// what is answered rather than returned to Lambda (a failing store, a response that cannot
// be replayed, a run without a key, a caller it cannot identify), and its hooks
// (idem.WithHooks) get, besides the guard's own events, OnUnguarded for every run without
// a key and every request refused for an unknown caller. Log lines and events name a
// request by its stored key (idem.Guard.StoredKey), never by the raw key, which may be
// personal data; nor do the errors returned to Lambda carry it (TestRawKeyNeverLogged).
//
// # Options
//
// An [HTTPOption] ([WithKeyRequired], [WithMethods], [WithCacheable], [WithHeader]) says
// how a request is guarded whatever its shape, and every HTTP decorator takes it. An
// [Option] ([WithTenant], [WithFingerprint], [WithFingerprintJMESPath]) reads the event,
// so its type names the event type: [Wrap] and each HTTP decorator take only the options
// of their own event type. A wrong option is a compile error, not a failure at start-up.
//
// The key is scoped by the caller's identity when the event carries one ([TenantREST],
// [TenantHTTPAPI], [TenantFunctionURL]), so the same key from two tenants is two records
// and no tenant is ever replayed another's response. An IAM caller that assumed a role is
// the role, whatever its session name, so a service retrying from another task, instance
// or container is the same tenant. A caller that API Gateway's mutual TLS authenticated
// is its client certificate's subject under the certificate's issuer, so a renewed
// certificate is the same tenant; an authorizer's identity comes before it. [WithTenant]
// overrides it.
//
// A request that is authenticated (its event carries an authorizer, JWT or IAM block, or
// a client certificate) but in which the default tenant finds no identity is refused with
// 500 [ProblemUnknownCaller], logged at ERROR and reported through OnUnguarded with
// [ErrUnknownCaller], and the handler does not run: scoped by no one, every such caller
// would share one tenant, and a second user who sent the first user's key would be
// replayed the first user's response. An HTTP API Lambda authorizer with simple responses
// whose context names the user otherwise than principalId or sub ({"userId": ...}), and a
// JWT without a sub claim, are the usual cases: say who the caller is with [WithTenant].
// So are an authorizer's numeric principalId or sub that a float64 may not hold exactly
// (an integer beyond 2^53, a fraction: aws-lambda-go decodes the authorizer's context
// into float64s, and two 64-bit ids can arrive as one; send such ids as strings), and a
// client certificate without a subject DN. A request that carries no authentication at
// all is not scoped by caller.
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
// See https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html
// and https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html
// for the API Gateway event shapes, https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html
// for function URLs, https://docs.aws.amazon.com/elasticloadbalancing/latest/application/lambda-functions.html
// for load balancers, and https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/
// for the header.
package lambdawrap
