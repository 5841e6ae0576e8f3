// Package idemhttp makes net/http handlers idempotent: [Middleware] wraps an http.Handler
// (a chi, gorilla or standard library router, or one route) so that a request with an
// Idempotency-Key header runs its handler at most once per key, and every retry gets the
// first response back, byte for byte. It is for Go APIs served over plain HTTP (on Fargate,
// App Runner, EC2, or on Lambda behind the Lambda Web Adapter or an API proxy), with the same
// HTTP semantics, from the same implementation, as the API Gateway decorators of package
// lambdawrap.
//
// # Mental model
//
// The middleware finds the request's key, reads the body to fingerprint the request, and
// hands the handler to an [idem.Guard], which claims the key, runs the handler, and
// stores its response: status, headers (every value, Set-Cookie included, byte for byte,
// even a value that is not UTF-8) and body. The
// handler writes to a ResponseWriter that holds the response back until the outcome is
// recorded, then sends it; a retry gets the stored response with "Idempotent-Replayed:
// true" and the handler does not run. Only the handler's own headers are stored: what
// middleware outside this one sets (a request id, CORS) is set afresh on every response.
// The stored form is lambdawrap's, so under the same operation and tenant a response that
// one stored is replayed by the other.
//
// A server's request context usually has no deadline, so the lease on a key is the
// guard's idem.WithLease (a minute by default) plus its margin, and the handler's context
// ends before the lease does: a handler that may run longer needs a longer lease, or
// idem.WithHeartbeat.
//
// A client that hangs up stops its request's claim, or its wait for a key in flight, but
// not a guarded run that has started: the handler's context keeps the request's values
// and not its cancellation, and ends with the lease as above. So the run finishes (its
// heartbeat going on) and the client's retry is answered 409 until it does, then replays
// its result; it never meets a half-done run whose lease was let go
// (TestClientDisconnectDoesNotEndTheRun).
//
// # HTTP semantics
//
// Following the IETF draft "The Idempotency-Key HTTP Header Field":
//
//	situation                                              response
//	guarded method (POST, PATCH; see WithMethods), no key  400, or unguarded (and reported) if not WithKeyRequired
//	key empty, over 255 characters, not printable ASCII,   400
//	  or two different values for the header
//	request body over WithMaxRequestBody                   413; the handler did not run
//	same key, request in flight                            409 with Retry-After (seconds)
//	same key, other method, path, query string or body     422
//	same key, completed                                    the stored response + Idempotent-Replayed: true
//	handler answers 5xx, 409, 429 (see WithCacheable)      that response; nothing stored, key released
//	handler panics                                         the panic goes on; nothing stored, key released
//	handler's context ended and it wrote nothing           503 with Retry-After; nothing stored, key released
//	store unavailable before the handler ran               503 with Retry-After; the handler did not run
//	handler ran, store committed nothing of its outcome    503 with Retry-After; key released, a retry runs again
//	handler ran, store failed to record its outcome        the handler's response, logged at ERROR
//	same, with attached writes and the record unreadable   503 with Retry-After; the outcome is unknown
//	response flushed, or over WithMaxResponseBody          sent as written; recorded without it (see below)
//	connection hijacked                                    the handler's; nothing stored, key released
//	other methods (GET, PUT, DELETE, ...)                  the handler, unguarded; the body is not read
//
// The meaning of each store failure, and of the problem types, is that of lambdawrap. Errors
// are RFC 9457 problem details (application/problem+json) whose type is one of the Problem
// constants. The header name is matched in any case; its value may be an RFC 8941 quoted
// string, which is unquoted, with or without parameters, which are checked and ignored
// (`"k";v=1` is the key k); repeated headers must carry the same key.
//
// An http.Handler returns no error, so a handler that meets idem's own errors tells the
// middleware by answering with them: a handler whose idem.Checkpoint fails with
// idem.ErrLeaseLost or idem.ErrStore answers 409 or 503 itself. The middleware stores no
// 409 or 5xx (by default), so the key is released and a retry runs again, as lambdawrap
// answers the same errors when a Lambda handler returns them.
//
// # A handler that gives up
//
// A handler's context ends when its lease runs out (see above) or at a server's deadline
// (http.TimeoutHandler, say). A handler that then gives up should do what net/http's
// idiom says and return without writing anything: that is no answer, so the middleware
// stores nothing, releases the key and answers 503 [ProblemAborted] with Retry-After, and
// the client's retry runs the handler again (TestAbortedRunReleasesTheKey). Whatever a
// handler writes, even a bare 200, is its answer, stored like any other: a handler that
// did its work should say so. One that cannot tell may answer 503 itself, which is not
// stored either.
//
// # Request bodies
//
// The fingerprint of a guarded request is its method, path, canonical query string and
// body (a JSON body canonicalised, so key order and white space do not matter), as in
// lambdawrap. The middleware reads the body whole, up to [WithMaxRequestBody], before the
// key is claimed, and gives the handler the same bytes in r.Body. A larger body is refused
// with 413 [ProblemRequestTooLarge]: fingerprinting only part of it would let two
// different requests share a record.
//
// # Streaming, hijacking and large responses
//
// A response is held back so that the client gets what the outcome means. Three things
// end that:
//
//   - Flush (http.Flusher, or http.ResponseController's Flush): the handler streams. What
//     is held back is sent with the flush, and the rest of the response as it is written.
//   - A body over [WithMaxResponseBody] (6 MiB by default): from the write that crosses the
//     limit, likewise.
//   - Hijack (http.Hijacker): the connection is the handler's.
//
// A streamed or large response is recorded as completed without the response, whatever
// its size, exactly as the guard records a result larger than idem.WithMaxResultSize:
// the handler never runs twice for the key, and a retry gets 500 [ProblemNotReplayable].
// Releasing the key instead would let a retry run the handler again, the one thing the
// guard exists to prevent; and part of the response has reached the client already, so
// it cannot be stored for a byte-for-byte replay, nor replaced by a 503 when the store
// fails to record the outcome (that failure is logged at ERROR instead). A streamed
// response with a status that is not cacheable (a 5xx) releases the key, as any other.
// A response that declares trailers is sent with them and recorded the same way, since
// the stored form has no trailers. A hijacked connection is no HTTP response at all: the
// guard cannot tell whether the handler succeeded, so, as for a handler error, nothing
// is stored and the key is released; WebSocket upgrades are GET requests, which are not
// guarded by default anyway.
//
// # Tenants
//
// Plain HTTP carries no verified caller identity, so the middleware has no default
// tenant: without [WithTenant], two callers who send the same key share one record, and
// the second is replayed the first one's response. Give WithTenant a function that reads
// the identity your authentication established.
//
// # Usage
//
//	store, err := dynamo.New(ddb, "idempotency")
//	...
//	guard, err := idem.New(store, "orders-api")
//	...
//	idempotent, err := idemhttp.Middleware(guard, idemhttp.WithTenant(userID))
//	...
//	r := chi.NewRouter()
//	r.With(idempotent).Post("/orders", createOrder)
//
// See https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/ for the
// header and https://www.rfc-editor.org/rfc/rfc9457 for problem details.
package idemhttp
