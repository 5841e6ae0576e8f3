package idemhttp

import "github.com/idemkit/idem/internal/httpsem"

// Problem types: the "type" member of the RFC 9457 problem details (application/problem+json)
// the middleware answers with. Each is the address of its own documentation. They are
// lambdawrap's, under this package's address, plus [ProblemRequestTooLarge].
const (
	// ProblemMissingKey (400): a guarded request carried no idempotency key and one is
	// required (see [WithKeyRequired]).
	ProblemMissingKey = problemBase + httpsem.ProblemMissingKey
	// ProblemInvalidKey (400): the key is empty, longer than 255 characters, not printable
	// ASCII, badly quoted, with malformed RFC 8941 parameters, or the header has two
	// different values.
	ProblemInvalidKey = problemBase + httpsem.ProblemInvalidKey
	// ProblemInvalidRequest (400): the request body could not be read.
	ProblemInvalidRequest = problemBase + httpsem.ProblemInvalidRequest
	// ProblemRequestTooLarge (413): the request body is larger than the middleware reads to
	// fingerprint a request (see [WithMaxRequestBody]). The handler did not run.
	ProblemRequestTooLarge = problemBase + httpsem.ProblemRequestTooLarge
	// ProblemInProgress (409): a request with the same key is being processed. Retry after
	// the seconds in Retry-After.
	ProblemInProgress = problemBase + httpsem.ProblemInProgress
	// ProblemLeaseLost (409): the request ran, but took so long that another request with
	// the same key took it over (or the handler met idem.ErrLeaseLost and returned it);
	// that one's response stands. Retry after Retry-After to get it.
	ProblemLeaseLost = problemBase + httpsem.ProblemLeaseLost
	// ProblemAttachedWriteFailed (409): a write the handler attached to the completion (see
	// idem.Attach) failed its condition, so neither it nor the record committed and the key
	// was released. [WithRefused] answers a refusal for good as the handler's author
	// chooses instead.
	ProblemAttachedWriteFailed = problemBase + httpsem.ProblemAttachedWriteFailed
	// ProblemKeyReused (422): the key was used before for a request with a different
	// method, path, query string or body.
	ProblemKeyReused = problemBase + httpsem.ProblemKeyReused
	// ProblemNotReplayable (500): the key's request completed, but its response cannot be
	// replayed: it was streamed, too large to hold or store, or the stored record is
	// unreadable. The handler is not run again; retrying does not help.
	ProblemNotReplayable = problemBase + httpsem.ProblemNotReplayable
	// ProblemStoreUnavailable (503): the idempotency store failed before the handler ran
	// (or the handler met idem.ErrStore and returned it), so the request was not processed.
	// Retry after Retry-After.
	ProblemStoreUnavailable = problemBase + httpsem.ProblemStoreUnavailable
	// ProblemNotCommitted (503): the handler ran, but the store committed nothing of its
	// outcome: neither the record nor the writes attached to it (see idem.Attach). The key
	// was released, so a retry after Retry-After runs the handler again.
	ProblemNotCommitted = problemBase + httpsem.ProblemNotCommitted
	// ProblemOutcomeUnknown (503): the handler ran and attached writes to its completion
	// (see idem.Attach), but whether they committed is unknown: the store failed, and
	// reading the record back failed too. Retry after Retry-After: until the lease ends a
	// retry gets 409; after it, a retry replays the response if the writes committed, and
	// runs the handler again if they did not.
	ProblemOutcomeUnknown = problemBase + httpsem.ProblemOutcomeUnknown
	// ProblemAborted (503): the handler's context ended (its lease ran out, or a server
	// deadline such as that of an http.TimeoutHandler around the middleware passed) and it
	// returned without writing a response: the run gave up. Nothing was stored and the key
	// was released, so a retry after Retry-After runs the handler again; effects the run
	// had outside its attached writes (idem.Attach) stand.
	ProblemAborted = problemBase + httpsem.ProblemAborted
)

// problemBase is the address of this package's documentation, where each problem type is
// documented.
const problemBase = httpsem.ProblemBase + pkg + "#"

// pkg names this package in option errors, log messages and problem types.
const pkg = "idemhttp"
