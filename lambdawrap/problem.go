package lambdawrap

import "github.com/idemkit/idem/internal/httpsem"

// Problem types: the "type" member of the RFC 9457 problem details the HTTP decorators
// answer with. Each is the address of its own documentation.
const (
	// ProblemMissingKey (400): a guarded request carried no idempotency key and one is
	// required (see [WithKeyRequired]).
	ProblemMissingKey = problemBase + httpsem.ProblemMissingKey
	// ProblemInvalidKey (400): the key is empty, longer than [MaxHeaderKeyLength], not printable
	// ASCII, badly quoted, with malformed RFC 8941 parameters, or the header has two
	// different values.
	ProblemInvalidKey = problemBase + httpsem.ProblemInvalidKey
	// ProblemInvalidRequest (400): the request could not be fingerprinted: a body marked
	// base64 that does not decode, or an error from [WithFingerprint].
	ProblemInvalidRequest = problemBase + httpsem.ProblemInvalidRequest
	// ProblemInProgress (409): a request with the same key is being processed. Retry after
	// the seconds in Retry-After.
	ProblemInProgress = problemBase + httpsem.ProblemInProgress
	// ProblemLeaseLost (409): the request ran, but took so long that another request with
	// the same key took it over; that one's response stands. Retry after Retry-After to get
	// it.
	ProblemLeaseLost = problemBase + httpsem.ProblemLeaseLost
	// ProblemAttachedWriteFailed (409): a write the handler attached to the completion (see
	// [idem.Attach]) failed its condition, so neither it nor the record committed and the
	// key was released.
	ProblemAttachedWriteFailed = problemBase + httpsem.ProblemAttachedWriteFailed
	// ProblemKeyReused (422): the key was used before for a request with a different
	// method, path, query string or body.
	ProblemKeyReused = problemBase + httpsem.ProblemKeyReused
	// ProblemNotReplayable (500): the key's request completed, but its response cannot be
	// replayed: it was too large to store, or the stored record is unreadable. The handler
	// is not run again; retrying does not help.
	ProblemNotReplayable = problemBase + httpsem.ProblemNotReplayable
	// ProblemUnknownCaller (500): the request was authenticated (it carries an authorizer,
	// JWT or IAM block) but the decorator found no caller identity in it to scope the key
	// by (see [ErrUnknownCaller]): a configuration fault of the function, which did not
	// run. Retrying does not help until the function says who its callers are with
	// [WithTenant].
	ProblemUnknownCaller = problemBase + httpsem.ProblemUnknownCaller
	// ProblemStoreUnavailable (503): the idempotency store failed before the handler ran,
	// so the request was not processed. Retry after Retry-After.
	ProblemStoreUnavailable = problemBase + httpsem.ProblemStoreUnavailable
	// ProblemNotCommitted (503): the handler ran, but the store committed nothing of its
	// outcome (see [github.com/idemkit/idem/idemstore.ErrNotCommitted]): neither the
	// record nor the writes attached to it (see [idem.Attach]). The key was released, so a
	// retry after Retry-After runs the handler again.
	ProblemNotCommitted = problemBase + httpsem.ProblemNotCommitted
	// ProblemOutcomeUnknown (503): the handler ran and attached writes to its completion
	// (see [idem.Attach]), but whether they committed is unknown: the store failed, and
	// reading the record back failed too. Retry after Retry-After: until the lease ends a
	// retry gets 409; after it, a retry replays the response if the writes committed, and
	// runs the handler again if they did not.
	ProblemOutcomeUnknown = problemBase + httpsem.ProblemOutcomeUnknown
	// ProblemAborted (503): the handler returned a zero response, one without a status
	// (its context ended, at the invocation's deadline or its lease's end, or a deadline
	// of its own passed): the run gave up. Nothing was stored and the key was released, so
	// a retry after Retry-After runs the handler again.
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
	// LeaseLostRetryAfter is the Retry-After of a 409 answered when the lease was lost: the
	// other owner is already running and usually done soon.
	LeaseLostRetryAfter = httpsem.LeaseLostRetryAfter
)
