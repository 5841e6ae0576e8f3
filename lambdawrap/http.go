package lambdawrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// ErrNotCacheable is the error a guarded HTTP handler's response presents to the guard when
// [WithCacheable] refuses to store it (by default 5xx, 409 and 429), so the guard releases
// the key and the next retry runs the handler again. The client still gets the response.
// It wraps [idem.ErrDoNotStore], so even a guard built with [idem.WithRememberFailures]
// never stores such a response.
var ErrNotCacheable = fmt.Errorf("lambdawrap: response not cacheable: %w", idem.ErrDoNotStore)

// httpRequest is what the guard reads from an event of any of the four shapes.
type httpRequest struct {
	method string
	path   string
	// The query string: raw in payload format 2.0, as maps in 1.0. Only the fingerprint
	// reads it, so it is canonicalised there, off the pass-through path.
	rawQuery     string
	query        map[string]string
	multiQuery   map[string][]string
	headers      map[string]string
	multiHeaders map[string][]string
	body         string
	base64       bool
	// multiValue is set for an ALB target group with multi-value headers: its responses
	// must carry their headers in MultiValueHeaders.
	multiValue bool
}

// httpResponse is the response of any of the four event shapes, and what the guard stores.
// Its JSON field names are those of the Lambda proxy integrations (as the Powertools
// utilities store an API Gateway handler's result); they are the stored format, so they do
// not change. Maps and slices have no omitempty, so a replay keeps nil apart from empty.
type httpResponse struct {
	StatusCode        int                 `json:"statusCode"`
	StatusDescription string              `json:"statusDescription,omitempty"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`
}

// markReplayed adds the replay header, in the map the integration reads.
func (r *httpResponse) markReplayed(multi bool) {
	if multi || (r.Headers == nil && r.MultiValueHeaders != nil) {
		for k := range r.MultiValueHeaders {
			if strings.EqualFold(k, ReplayedHeader) {
				delete(r.MultiValueHeaders, k)
			}
		}
		if r.MultiValueHeaders == nil {
			r.MultiValueHeaders = make(map[string][]string, 1)
		}
		r.MultiValueHeaders[ReplayedHeader] = []string{"true"}
		return
	}
	for k := range r.Headers {
		if strings.EqualFold(k, ReplayedHeader) {
			delete(r.Headers, k)
		}
	}
	if r.Headers == nil {
		r.Headers = make(map[string]string, 1)
	}
	r.Headers[ReplayedHeader] = "true"
}

// shape converts one event type and its response type to and from the shared form.
type shape[In, Out any] struct {
	name     string
	request  func(*In) httpRequest
	tenant   func(In) string
	toHTTP   func(*Out) httpResponse
	fromHTTP func(*httpResponse) Out
}

// handlerError carries an error returned by the user's handler through the guard.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// httpWrapper is the one implementation behind the four HTTP decorators.
type httpWrapper[In, Out any] struct {
	g           *idem.Guard
	c           *config
	h           func(context.Context, In) (Out, error)
	s           shape[In, Out]
	tenant      func(In) string
	fingerprint func(In) ([]byte, error) // nil: the request's default fingerprint
}

func decorate[In, Out any](g *idem.Guard, h func(context.Context, In) (Out, error), s shape[In, Out], opts []Option) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil {
		return nil, optErr(s.name, "guard and handler must not be nil")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	w := &httpWrapper[In, Out]{g: g, c: c, h: h, s: s}
	if w.tenant, err = resolveTenant(c, s.tenant); err != nil {
		return nil, err
	}
	if w.fingerprint, err = resolveFingerprint[In](c, nil); err != nil {
		return nil, err
	}
	return w.handle, nil
}

// handle implements the semantics table of the package documentation.
func (w *httpWrapper[In, Out]) handle(ctx context.Context, in In) (Out, error) {
	req := w.s.request(&in)
	if !w.c.methods[strings.ToUpper(req.method)] {
		return w.h(ctx, in)
	}
	key, err := parseKey(headerValues(w.c.header, req.headers, req.multiHeaders))
	if err != nil {
		if errors.Is(err, idem.ErrMissingKey) && !w.c.keyRequired {
			reportUnguarded(ctx, w.g, err)
			return w.h(ctx, in)
		}
		return w.reply(refuseKey(err, w.c.header, req.multiValue))
	}
	fp, err := w.fingerprintOf(in, &req)
	if err != nil {
		detail := "the request could not be fingerprinted"
		if errors.Is(err, errBadBase64) {
			detail = "the request body is marked base64 but does not decode"
		}
		return w.reply(problem(http.StatusBadRequest, ProblemInvalidRequest, detail, 0, req.multiValue))
	}

	var (
		first Out
		ran   bool // the handler returned a response
	)
	resp, replayed, err := idem.Do(ctx, w.g, idem.Request{Key: key, Tenant: w.tenant(in), Fingerprint: fp},
		func(ctx context.Context) (httpResponse, error) {
			out, err := w.h(ctx, in)
			if err != nil {
				return httpResponse{}, &handlerError{err}
			}
			first, ran = out, true
			resp := w.s.toHTTP(&out)
			if !w.c.cacheable(resp.StatusCode) {
				return resp, ErrNotCacheable
			}
			return resp, nil
		})
	switch {
	case err == nil && replayed:
		resp.markReplayed(req.multiValue)
		return w.reply(resp)
	case err == nil, errors.Is(err, ErrNotCacheable):
		return first, nil // exactly what the handler returned
	}
	var he *handlerError
	if errors.As(err, &he) {
		if resp, ok := handlerProblem(ctx, w.g.Logger(), he.err, req.multiValue); ok {
			return w.reply(resp)
		}
		var zero Out
		return zero, he.err
	}
	if ran && notRecorded(err) {
		// The handler's effects happened: its response is the truth, and a 503 would
		// tell the client that nothing ran.
		logNotRecorded(ctx, w.c.logger, err)
		return first, nil
	}
	return w.failure(ctx, err, req.multiValue)
}

func (w *httpWrapper[In, Out]) fingerprintOf(in In, req *httpRequest) ([]byte, error) {
	if w.fingerprint != nil {
		return w.fingerprint(in)
	}
	return req.fingerprint()
}

func (w *httpWrapper[In, Out]) reply(r httpResponse) (Out, error) { return w.s.fromHTTP(&r), nil }

// failure maps an error of the guard to its HTTP answer. Errors with no HTTP meaning (a
// cancelled context, a remembered failure) go back to Lambda as invocation errors.
func (w *httpWrapper[In, Out]) failure(ctx context.Context, err error, multi bool) (Out, error) {
	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		return w.reply(problem(http.StatusConflict, ProblemInProgress,
			"a request with this idempotency key is being processed", inProgress.RetryAfter, multi))
	case errors.Is(err, idem.ErrPayloadMismatch):
		return w.reply(problem(http.StatusUnprocessableEntity, ProblemKeyReused,
			"this idempotency key was used for a request with a different method, path, query or body", 0, multi))
	case errors.Is(err, idem.ErrLeaseLost):
		w.c.logger.WarnContext(ctx, "lambdawrap: lease lost; another request with the key took over", "error", err)
		return w.reply(leaseLostProblem(multi))
	case errors.Is(err, idem.ErrConditionFailed):
		return w.reply(problem(http.StatusConflict, ProblemAttachedWriteFailed,
			"the request conflicts with the current state of the resource", 0, multi))
	case errors.Is(err, idem.ErrResultNotStored), errors.Is(err, idem.ErrIncompatibleRecord):
		w.c.logger.ErrorContext(ctx, "lambdawrap: completed response cannot be replayed", "error", err)
		return w.reply(problem(http.StatusInternalServerError, ProblemNotReplayable,
			"the request with this idempotency key completed, but its response cannot be replayed", 0, multi))
	case isOp(err, idem.OpCommit): // before ErrStore, which it also satisfies
		w.c.logger.ErrorContext(ctx, "lambdawrap: the handler ran, but whether its attached writes committed is unknown", "error", err)
		return w.reply(problem(http.StatusServiceUnavailable, ProblemOutcomeUnknown,
			"the request ran, but whether its outcome committed is unknown; retry after Retry-After to learn it", StoreRetryAfter, multi))
	case errors.Is(err, idemstore.ErrNotCommitted): // before ErrStore, which it may also satisfy
		w.c.logger.ErrorContext(ctx, "lambdawrap: the handler's outcome was not committed; the key was released", "error", err)
		return w.reply(problem(http.StatusServiceUnavailable, ProblemNotCommitted,
			"the request ran, but nothing of its outcome was committed; a retry runs it again", StoreRetryAfter, multi))
	case errors.Is(err, idem.ErrStore):
		w.c.logger.ErrorContext(ctx, "lambdawrap: idempotency store failed", "error", err)
		return w.reply(storeProblem(multi))
	case errors.Is(err, idem.ErrMissingKey), errors.Is(err, idem.ErrInvalidKey):
		return w.reply(refuseKey(err, w.c.header, multi))
	}
	var zero Out
	return zero, err
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

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
