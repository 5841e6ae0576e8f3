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
// one stored is replayed by the other. A header value that is not UTF-8 is stored in a
// field that releases before it do not know (see the README's "A replay must fit its
// type"): during a rolling deploy an older instance answers such a record 500
// [ProblemNotReplayable], and never runs the handler again.
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
// # Where to mount it
//
// Mount http.TimeoutHandler, and any wrapper that answers the client while the handler
// goes on, outside the middleware: TimeoutHandler(Middleware(h)), never
// Middleware(TimeoutHandler(h)). Inside, its 503 is the answer the middleware records: a
// 5xx, so the key is released while the handler still runs in TimeoutHandler's goroutine,
// and the client's retry runs it a second time, concurrently with the first; nothing the
// middleware sees tells that 503 from a handler's own
// (TestReviewTimeoutHandlerInsideReleasesARunningHandler). Only attached writes stay
// safe there: the first run's lease closed when the middleware's run returned, so its later
// idem.Attach fails with idem.ErrNoLease. Outside, the timeout is the deadline of the
// handler's context and of its lease: TimeoutHandler answers the client, the middleware
// still records what the handler does (its answer, or a release if it gives up, see
// below), and the client's retry meets 409 until then. A per-route timeout of your own
// inside the middleware is fine as long as it only ends the handler's context and lets the
// handler answer (see "A handler that gives up").
//
// # HTTP semantics
//
// Following the IETF draft "The Idempotency-Key HTTP Header Field", the middleware answers:
//
//   - a guarded method (POST, PATCH; see WithMethods) without a key: 400, or unguarded (and
//     reported) if not WithKeyRequired;
//   - a key empty, over 255 characters or not printable ASCII, or two different values for
//     the header: 400;
//   - a request body over WithMaxRequestBody: 413; the handler did not run;
//   - the same key, its request in flight: 409 with Retry-After (seconds);
//   - the same key with another method, path, query string or body: 422;
//   - the same key, completed: the stored response, with Idempotent-Replayed: true;
//   - a handler that answers 5xx, 409 or 429 (see WithCacheable): that response; nothing
//     stored, the key released;
//   - a handler that panics: the panic goes on; nothing stored, the key released (after
//     part of its response was sent: as streamed, below);
//   - a handler whose context ended and that wrote nothing: 503 with Retry-After; nothing
//     stored, the key released (see "A handler that gives up");
//   - the store unavailable before the handler ran: 503 with Retry-After; the handler did
//     not run;
//   - the handler ran, and the store committed nothing of its outcome: 503 with
//     Retry-After; the key released, a retry runs again;
//   - the handler ran, and the store refused an attached write's condition: 409; nothing
//     stored, the key released; or, for a refusal for good, the answer WithRefused
//     chooses, stored and replayed like a handler's 4xx;
//   - the handler ran, and the store failed to record its outcome: the handler's response,
//     logged at ERROR;
//   - the same, with attached writes and the record unreadable: 503 with Retry-After; the
//     outcome is unknown;
//   - a response flushed, or over WithMaxResponseBody: sent as written; recorded without it
//     (see below), also when the store refuses its attached writes for good (recorded
//     without them; WithRefused is not asked);
//   - a connection hijacked: the handler's answer; nothing stored, the key released;
//   - other methods (GET, PUT, DELETE, ...): the handler, unguarded; the body is not read.
//
// Every request refused or failed for a reason of idem's (in flight, payload mismatch,
// lease lost, store down, …) gets one INFO line through the guard's logger, "idemhttp:
// request refused", with its stored key (never the raw key), the reason and the status,
// from which on-call finds its record (TestRefusalLogged).
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
// (http.TimeoutHandler around the middleware, say). The middleware cannot tell a handler
// that did its work and wrote nothing from one that gave up, so the contract, net/http's
// idiom, is this:
//
//   - A handler whose work is done answers with a status (WriteHeader, or a body). That is
//     its answer, stored like any other, even after its context ended.
//   - A handler whose context ended and that wrote nothing gave up: the middleware stores
//     nothing, releases the key and answers 503 [ProblemAborted] with Retry-After, and the
//     client's retry runs the handler again (TestAbortedRunReleasesTheKey). That holds for
//     a handler that did its work and then returned without a word
//     (TestReviewFinishedRunWithoutAnswerIsReleased): its retry does the work again.
//   - A handler that gives up under a deadline of its own (context.WithTimeout around a
//     downstream call, or a timeout middleware mounted inside this one), which the
//     middleware does not see, answers 503 or 504 itself: a 5xx is not stored, so the key
//     is released and the retry runs again. Writing nothing there is net/http's 200, with
//     the middleware's context alive, and that is stored and replayed
//     (TestReviewGiveUpUnderAnInnerDeadlineIsStored).
//
// A run that is released leaves behind whatever effects it had: the retry runs the handler
// again. The safe place for effects is the completion: writes attached to it
// (idem.Attach; dynamo.Attach, pgstore.Attach) commit with the record or not at all, so a
// run that gave up left none of them, and the retry makes them once
// (TestGiveUpWithAttachedWritesLeavesNoEffect). Other effects must be safe to repeat (a
// downstream call keyed by idem.StoredKey, say).
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
// fails to record the outcome (that failure is logged at ERROR instead). Attached writes
// the store refuses for good do not change that: the run is recorded as sent without them
// (idem.OnRefused), and a retry gets 500 [ProblemNotReplayable]
// (TestStreamedThenRefusedNeverRunsAgain); a refusal that may not recur (a conflict)
// commits nothing and releases the key, as for any response. A streamed
// response with a status that is not cacheable (a 5xx) releases the key, as any other.
// So does a handler that panics once part of its response was sent (a flushed status, say,
// then panic(http.ErrAbortHandler) to break the stream off): the client has the response,
// so the run is recorded as above before the panic goes on, and a retry never runs it
// again (TestReviewFlushedThenPanickedRunsAgain); a panic other than http.ErrAbortHandler
// is logged at ERROR with its stack, which net/http's own log of it no longer shows.
// A response that declares trailers is sent with them and recorded the same way, since
// the stored form has no trailers. A hijacked connection is no HTTP response at all: the
// guard cannot tell whether the handler succeeded, so, as for a handler error, nothing
// is stored and the key is released; WebSocket upgrades are GET requests, which are not
// guarded by default anyway. A hijack after part of the response was sent (a flush) is
// recorded as the streamed response it began as.
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
