package httpsem

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// Problem types: the fragment of the "type" member of the RFC 9457 problem details the
// wrappers answer with. The whole type is the address of the public package's constant of
// the same name ([Settings.ProblemType]), which documents it.
const (
	// ProblemMissingKey (400): a required key is missing.
	ProblemMissingKey = "ProblemMissingKey"
	// ProblemInvalidKey (400): the key is malformed.
	ProblemInvalidKey = "ProblemInvalidKey"
	// ProblemInvalidRequest (400): the request cannot be fingerprinted.
	ProblemInvalidRequest = "ProblemInvalidRequest"
	// ProblemRequestTooLarge (413): the body is too large to fingerprint.
	ProblemRequestTooLarge = "ProblemRequestTooLarge"
	// ProblemInProgress (409): in flight, Retry-After.
	ProblemInProgress = "ProblemInProgress"
	// ProblemLeaseLost (409): another run took over, Retry-After.
	ProblemLeaseLost = "ProblemLeaseLost"
	// ProblemAttachedWriteFailed (409): an attached write's condition failed.
	ProblemAttachedWriteFailed = "ProblemAttachedWriteFailed"
	// ProblemKeyReused (422): the key was used for another request.
	ProblemKeyReused = "ProblemKeyReused"
	// ProblemNotReplayable (500): completed, but not replayable.
	ProblemNotReplayable = "ProblemNotReplayable"
	// ProblemUnknownCaller (500): authenticated, but no caller identity.
	ProblemUnknownCaller = "ProblemUnknownCaller"
	// ProblemStoreUnavailable (503): the handler did not run.
	ProblemStoreUnavailable = "ProblemStoreUnavailable"
	// ProblemNotCommitted (503): ran, nothing committed.
	ProblemNotCommitted = "ProblemNotCommitted"
	// ProblemOutcomeUnknown (503): ran, outcome unknown.
	ProblemOutcomeUnknown = "ProblemOutcomeUnknown"
	// ProblemAborted (503): the run gave up, nothing stored.
	ProblemAborted = "ProblemAborted"
)

// ProblemBase is the address of the problem types of a public package: its documentation.
const ProblemBase = "https://pkg.go.dev/github.com/idemkit/idem/"

// ProblemType returns the "type" of problem, a Problem constant, for s's package; "" is
// "about:blank", the type of a problem that means no more than its status.
func (s *Settings) ProblemType(problem string) string {
	if problem == "" {
		return "about:blank"
	}
	return ProblemBase + s.Package + "#" + problem
}

// problemContentType is the media type of RFC 9457 problem details in JSON.
const problemContentType = "application/problem+json"

// problemBody is an RFC 9457 problem details object.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Problem builds an error response of the Problem type problem. A positive retryAfter
// adds Retry-After in whole seconds, rounded up. In multi-value mode (ALB, net/http) the
// headers go in MultiValueHeaders, which is the only map the wrapper reads then.
func (s *Guard) Problem(status int, problem, detail string, retryAfter time.Duration, multi bool) Response {
	// Marshal cannot fail: the body holds strings and an int.
	body, _ := json.Marshal(problemBody{Type: s.s.ProblemType(problem), Title: http.StatusText(status), Status: status, Detail: detail})
	headers := map[string]string{"Content-Type": problemContentType}
	if retryAfter > 0 {
		headers["Retry-After"] = strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10)
	}
	r := Response{
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
func (s *Guard) guardProblem(ctx context.Context, err error, multi bool) (Response, bool) {
	l := s.g.Logger()
	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		return s.Problem(http.StatusConflict, ProblemInProgress,
			"a request with this idempotency key is being processed", inProgress.RetryAfter, multi), true
	case errors.Is(err, idem.ErrPayloadMismatch):
		return s.Problem(http.StatusUnprocessableEntity, ProblemKeyReused,
			"this idempotency key was used for a request with a different method, path, query or body", 0, multi), true
	case errors.Is(err, idem.ErrLeaseLost):
		return s.leaseLostProblem(multi), true
	case errors.Is(err, idem.ErrConditionFailed):
		return s.Problem(http.StatusConflict, ProblemAttachedWriteFailed,
			"the request conflicts with the current state of the resource", 0, multi), true
	case errors.Is(err, idem.ErrResultNotStored), errors.Is(err, idem.ErrIncompatibleRecord):
		l.ErrorContext(ctx, s.s.Package+": completed response cannot be replayed", "error", err)
		return s.Problem(http.StatusInternalServerError, ProblemNotReplayable,
			"the request with this idempotency key completed, but its response cannot be replayed", 0, multi), true
	case isOp(err, idem.OpCommit): // before ErrStore, which it also satisfies
		return s.Problem(http.StatusServiceUnavailable, ProblemOutcomeUnknown,
			"the request ran, but whether its outcome committed is unknown; retry after Retry-After to learn it", StoreRetryAfter, multi), true
	case errors.Is(err, idemstore.ErrNotCommitted): // before ErrStore, which it may also satisfy
		return s.Problem(http.StatusServiceUnavailable, ProblemNotCommitted,
			"the request ran, but nothing of its outcome was committed; a retry runs it again", StoreRetryAfter, multi), true
	case errors.Is(err, idem.ErrStore):
		l.ErrorContext(ctx, s.s.Package+": idempotency store failed", "error", err)
		return s.storeProblem(multi), true
	case errors.Is(err, idem.ErrMissingKey), errors.Is(err, idem.ErrInvalidKey):
		return s.refuseKey(err, multi), true
	}
	return Response{}, false
}

// handlerProblem answers an error that a guarded handler returned, when it is one the
// handler met from idem itself and has an HTTP meaning: a lost lease (from idem.Checkpoint,
// or a nested guard) is answered as a completion that finds its lease lost (409
// ProblemLeaseLost), a store failure as a claim that fails (503 ProblemStoreUnavailable).
// Nothing was stored and the key was released, so a retry runs the handler again. Any
// other error, idem.ErrNoLease included, is not answered.
func (s *Guard) handlerProblem(ctx context.Context, err error, multi bool) (Response, bool) {
	l := s.g.Logger()
	switch {
	case errors.Is(err, idem.ErrLeaseLost):
		// The guard logs lost leases it finds itself, not one the handler met.
		l.WarnContext(ctx, s.s.Package+": the handler lost its lease; another request with the key took over", "error", err)
		return s.leaseLostProblem(multi), true
	case errors.Is(err, idem.ErrStore):
		l.ErrorContext(ctx, s.s.Package+": idempotency store failed", "error", err)
		return s.storeProblem(multi), true
	}
	return Response{}, false
}

func (s *Guard) leaseLostProblem(multi bool) Response {
	return s.Problem(http.StatusConflict, ProblemLeaseLost,
		"another request with this idempotency key took over; retry to get its response", LeaseLostRetryAfter, multi)
}

func (s *Guard) storeProblem(multi bool) Response {
	return s.Problem(http.StatusServiceUnavailable, ProblemStoreUnavailable,
		"the idempotency store is unavailable; the request was not processed", StoreRetryAfter, multi)
}

// refuseKey answers a request whose key is missing or invalid.
func (s *Guard) refuseKey(err error, multi bool) Response {
	typ, detail := ProblemInvalidKey, "the idempotency key is invalid"
	if errors.Is(err, idem.ErrMissingKey) {
		typ, detail = ProblemMissingKey, "this request requires an idempotency key in the "+s.s.Header+" header"
	}
	var ke *keyError
	if errors.As(err, &ke) && errors.Is(ke.sentinel, idem.ErrInvalidKey) {
		detail = ke.reason
	}
	return s.Problem(http.StatusBadRequest, typ, detail, 0, multi)
}
