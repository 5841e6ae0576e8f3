package lambdawrap

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Problem types: the "type" member of the RFC 9457 problem details the HTTP decorators
// answer with. Each is the address of its own documentation.
const (
	// ProblemMissingKey (400): a guarded request carried no idempotency key and one is
	// required (see [WithKeyRequired]).
	ProblemMissingKey = problemBase + "ProblemMissingKey"
	// ProblemInvalidKey (400): the key is empty, longer than [MaxKeyLength], not printable
	// ASCII, badly quoted, or the header has two different values.
	ProblemInvalidKey = problemBase + "ProblemInvalidKey"
	// ProblemInvalidRequest (400): the request could not be fingerprinted: a body marked
	// base64 that does not decode, or an error from [WithFingerprint].
	ProblemInvalidRequest = problemBase + "ProblemInvalidRequest"
	// ProblemInProgress (409): a request with the same key is being processed. Retry after
	// the seconds in Retry-After.
	ProblemInProgress = problemBase + "ProblemInProgress"
	// ProblemLeaseLost (409): the request ran, but took so long that another request with
	// the same key took it over; that one's response stands. Retry after Retry-After to get
	// it.
	ProblemLeaseLost = problemBase + "ProblemLeaseLost"
	// ProblemAttachedWriteFailed (409): a write the handler attached to the completion (see
	// [idem.Attach]) failed its condition, so neither it nor the record committed and the
	// key was released.
	ProblemAttachedWriteFailed = problemBase + "ProblemAttachedWriteFailed"
	// ProblemKeyReused (422): the key was used before for a request with a different
	// method, path, query string or body.
	ProblemKeyReused = problemBase + "ProblemKeyReused"
	// ProblemNotReplayable (500): the key's request completed, but its response cannot be
	// replayed: it was too large to store, or the stored record is unreadable. The handler
	// is not run again; retrying does not help.
	ProblemNotReplayable = problemBase + "ProblemNotReplayable"
	// ProblemStoreUnavailable (503): the idempotency store failed before the handler ran,
	// so the request was not processed. Retry after Retry-After.
	ProblemStoreUnavailable = problemBase + "ProblemStoreUnavailable"
	// ProblemNotCommitted (503): the handler ran, but the store committed nothing of its
	// outcome (see [idemstore.ErrNotCommitted]): neither the record nor the writes attached to
	// it (see [idem.Attach]). The key was released, so a retry after Retry-After runs the
	// handler again.
	ProblemNotCommitted = problemBase + "ProblemNotCommitted"
	// ProblemOutcomeUnknown (503): the handler ran and attached writes to its completion
	// (see [idem.Attach]), but whether they committed is unknown: the store failed, and
	// reading the record back failed too. Retry after Retry-After: until the lease ends a
	// retry gets 409; after it, a retry replays the response if the writes committed, and
	// runs the handler again if they did not.
	ProblemOutcomeUnknown = problemBase + "ProblemOutcomeUnknown"
)

const problemBase = "https://pkg.go.dev/github.com/idemkit/idem/lambdawrap#"

// Retry-After values of responses whose wait is not known from a lease.
const (
	// StoreRetryAfter is the Retry-After of a 503 answered when the store fails.
	StoreRetryAfter = time.Second
	// LeaseLostRetryAfter is the Retry-After of a 409 answered when the lease was lost: the
	// other owner is already running and usually done soon.
	LeaseLostRetryAfter = time.Second
)

// problemContentType is the media type of RFC 9457 problem details in JSON.
const problemContentType = "application/problem+json"

// problemBody is an RFC 9457 problem details object.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// problem builds an error response. A positive retryAfter adds Retry-After in whole
// seconds, rounded up. In multi-value mode (ALB) the headers go in MultiValueHeaders,
// which is the only map the load balancer reads then.
func problem(status int, typ, detail string, retryAfter time.Duration, multi bool) httpResponse {
	body, _ := json.Marshal(problemBody{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail}) // cannot fail: strings and an int
	headers := map[string]string{"Content-Type": problemContentType}
	if retryAfter > 0 {
		headers["Retry-After"] = strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10)
	}
	r := httpResponse{
		StatusCode:        status,
		StatusDescription: strconv.Itoa(status) + " " + http.StatusText(status),
		Body:              string(body),
	}
	if multi {
		r.MultiValueHeaders = make(map[string][]string, len(headers))
		for k, v := range headers {
			r.MultiValueHeaders[k] = []string{v}
		}
	} else {
		r.Headers = headers
	}
	return r
}

// guardProblem maps an error of the guard to its HTTP answer, or reports false when it has
// none (a cancelled context, a remembered failure). It logs what the client is answered
// and no one else logs: a store that failed before the handler ran (the guard returns
// that error without logging it) and a response that cannot be replayed. The guard
// itself logs lost leases and failed completions.
func guardProblem(ctx context.Context, l *slog.Logger, err error, header string, multi bool) (httpResponse, bool) {
	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		return problem(http.StatusConflict, ProblemInProgress,
			"a request with this idempotency key is being processed", inProgress.RetryAfter, multi), true
	case errors.Is(err, idem.ErrPayloadMismatch):
		return problem(http.StatusUnprocessableEntity, ProblemKeyReused,
			"this idempotency key was used for a request with a different method, path, query or body", 0, multi), true
	case errors.Is(err, idem.ErrLeaseLost):
		return leaseLostProblem(multi), true
	case errors.Is(err, idem.ErrConditionFailed):
		return problem(http.StatusConflict, ProblemAttachedWriteFailed,
			"the request conflicts with the current state of the resource", 0, multi), true
	case errors.Is(err, idem.ErrResultNotStored), errors.Is(err, idem.ErrIncompatibleRecord):
		l.ErrorContext(ctx, "lambdawrap: completed response cannot be replayed", "error", err)
		return problem(http.StatusInternalServerError, ProblemNotReplayable,
			"the request with this idempotency key completed, but its response cannot be replayed", 0, multi), true
	case isOp(err, idem.OpCommit): // before ErrStore, which it also satisfies
		return problem(http.StatusServiceUnavailable, ProblemOutcomeUnknown,
			"the request ran, but whether its outcome committed is unknown; retry after Retry-After to learn it", StoreRetryAfter, multi), true
	case errors.Is(err, idemstore.ErrNotCommitted): // before ErrStore, which it may also satisfy
		return problem(http.StatusServiceUnavailable, ProblemNotCommitted,
			"the request ran, but nothing of its outcome was committed; a retry runs it again", StoreRetryAfter, multi), true
	case errors.Is(err, idem.ErrStore):
		l.ErrorContext(ctx, "lambdawrap: idempotency store failed", "error", err)
		return storeProblem(multi), true
	case errors.Is(err, idem.ErrMissingKey), errors.Is(err, idem.ErrInvalidKey):
		return refuseKey(err, header, multi), true
	}
	return httpResponse{}, false
}

// handlerProblem answers an error that a guarded handler returned, when it is one the
// handler met from idem itself and has an HTTP meaning: a lost lease (from idem.Checkpoint,
// or a nested guard) is answered as a completion that finds its lease lost (409
// [ProblemLeaseLost]), a store failure as a claim that fails (503
// [ProblemStoreUnavailable]). Nothing was stored and the key was released, so a retry runs
// the handler again. Any other error, [idem.ErrNoLease] included, goes back to Lambda.
func handlerProblem(ctx context.Context, l *slog.Logger, err error, multi bool) (httpResponse, bool) {
	switch {
	case errors.Is(err, idem.ErrLeaseLost):
		// The guard logs lost leases it finds itself, not one the handler met.
		l.WarnContext(ctx, "lambdawrap: the handler lost its lease; another request with the key took over", "error", err)
		return leaseLostProblem(multi), true
	case errors.Is(err, idem.ErrStore):
		l.ErrorContext(ctx, "lambdawrap: idempotency store failed", "error", err)
		return storeProblem(multi), true
	}
	return httpResponse{}, false
}

func leaseLostProblem(multi bool) httpResponse {
	return problem(http.StatusConflict, ProblemLeaseLost,
		"another request with this idempotency key took over; retry to get its response", LeaseLostRetryAfter, multi)
}

func storeProblem(multi bool) httpResponse {
	return problem(http.StatusServiceUnavailable, ProblemStoreUnavailable,
		"the idempotency store is unavailable; the request was not processed", StoreRetryAfter, multi)
}

// refuseKey answers a request whose key is missing or invalid.
func refuseKey(err error, header string, multi bool) httpResponse {
	typ, detail := ProblemInvalidKey, "the idempotency key is invalid"
	if errors.Is(err, idem.ErrMissingKey) {
		typ, detail = ProblemMissingKey, "this request requires an idempotency key in the "+header+" header"
	}
	var ke *keyError
	if errors.As(err, &ke) && ke.sentinel == idem.ErrInvalidKey {
		detail = ke.reason
	}
	return problem(http.StatusBadRequest, typ, detail, 0, multi)
}
