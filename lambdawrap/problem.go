package lambdawrap

import "github.com/idemkit/idem/internal/httpsem"

// Problem types are the "type" member of the RFC 9457 problem details the HTTP decorators
// answer with. Each is the address of its own documentation.
const (
	// ProblemMissingKey (400): a guarded request carried no idempotency key and one is
	// required (see [WithKeyRequired]).
	ProblemMissingKey = problemBase + httpsem.ProblemMissingKey
	// ProblemInvalidKey (400): the key is malformed. It is empty, longer than
	// [MaxHeaderKeyLength], not printable ASCII, badly quoted, or with malformed RFC 8941
	// parameters. Or the header has two different values.
	ProblemInvalidKey = problemBase + httpsem.ProblemInvalidKey
	// ProblemInvalidRequest (400): the request could not be fingerprinted: a body marked
	// base64 that does not decode, or an error from [WithFingerprint].
	ProblemInvalidRequest = problemBase + httpsem.ProblemInvalidRequest
	// ProblemInProgress (409): a request with the same key is being processed. Retry after
	// the seconds in Retry-After.
	ProblemInProgress = problemBase + httpsem.ProblemInProgress
	// ProblemLeaseLost (409): the request ran so long that another request with the same
	// key took it over. That one's response stands. Retry after Retry-After to get it.
	ProblemLeaseLost = problemBase + httpsem.ProblemLeaseLost
	// ProblemAttachedWriteFailed (409): a write attached to the completion failed its
	// condition. The handler attached it (see [idem.Attach]). Neither the write nor the
	// record committed, and the key was released. [WithRefused] answers a refusal for good
	// as the handler's author chooses instead.
	ProblemAttachedWriteFailed = problemBase + httpsem.ProblemAttachedWriteFailed
	// ProblemKeyReused (422): the key was used before for a request with a different
	// method, path, query string or body.
	ProblemKeyReused = problemBase + httpsem.ProblemKeyReused
	// ProblemNotReplayable (500): the key's request completed, but its response cannot be
	// replayed. It was too large to store, or the stored record is unreadable. The handler
	// is not run again. Retrying does not help.
	ProblemNotReplayable = problemBase + httpsem.ProblemNotReplayable
	// ProblemUnknownCaller (500): the request was authenticated, but the decorator found
	// no caller identity in it to scope the key by (see [ErrUnknownCaller]). The request
	// carries an authorizer, JWT or IAM block. This is a configuration fault of the
	// function, which did not run. Retrying does not help until the function says who its
	// callers are with [WithTenant].
	ProblemUnknownCaller = problemBase + httpsem.ProblemUnknownCaller
	// ProblemStoreUnavailable (503): the idempotency store failed before the handler ran,
	// so the request was not processed. Retry after Retry-After.
	ProblemStoreUnavailable = problemBase + httpsem.ProblemStoreUnavailable
	// ProblemNotCommitted (503): the handler ran, but the store committed nothing of its
	// outcome (see [github.com/idemkit/idem/idemstore.ErrNotCommitted]). Neither the
	// record nor the writes attached to it (see [idem.Attach]) committed. The key was
	// released, so a retry after Retry-After runs the handler again.
	ProblemNotCommitted = problemBase + httpsem.ProblemNotCommitted
	// ProblemOutcomeUnknown (503): the handler ran and attached writes to its completion
	// (see [idem.Attach]), but whether they committed is unknown. The store failed, and
	// reading the record back failed too. Retry after Retry-After:
	//
	//   - until the lease ends, a retry gets 409;
	//   - after it, a retry replays the response if the writes committed;
	//   - if they did not, it runs the handler again.
	ProblemOutcomeUnknown = problemBase + httpsem.ProblemOutcomeUnknown
	// ProblemAborted (503): the handler returned a zero response, one without a status.
	// The run gave up: its context ended, at the invocation's deadline or its lease's end,
	// or a deadline of its own passed. Nothing was stored, and the key was released. So a
	// retry after Retry-After runs the handler again.
	ProblemAborted = problemBase + httpsem.ProblemAborted
)

// problemBase is the address of this package's documentation, where each problem type
// is documented.
const problemBase = httpsem.ProblemBase + pkg + "#"

// pkg names this package in option errors, log messages and problem types.
const pkg = "lambdawrap"

// Retry-After values of responses whose wait is not known from a lease.
const (
	// StoreRetryAfter is the Retry-After of a 503 answered when the store fails.
	StoreRetryAfter = httpsem.StoreRetryAfter
	// LeaseLostRetryAfter is the Retry-After of a 409 answered when the lease was lost.
	// The other owner is already running and usually done soon.
	LeaseLostRetryAfter = httpsem.LeaseLostRetryAfter
)
