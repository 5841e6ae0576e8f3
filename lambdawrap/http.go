package lambdawrap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
)

// This file holds the HTTP semantics of the package documentation, independent of how a
// request arrives: it knows requests and responses (httpRequest, httpResponse), not event
// types, which events.go maps onto it.

// ErrNotCacheable is the error a guarded HTTP handler's response presents to the guard when
// [WithCacheable] refuses to store it (by default 5xx, 409 and 429), so the guard releases
// the key and the next retry runs the handler again. The client still gets the response.
// It wraps [idem.ErrDoNotStore], so even a guard built with [idem.WithRememberFailures]
// never stores such a response.
var ErrNotCacheable = fmt.Errorf("lambdawrap: response not cacheable: %w", idem.ErrDoNotStore)

// httpRequest is what the guard reads from a request, whatever its shape.
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

// httpResponse is a response of any shape, and what the guard stores. Its JSON field names
// are those of the Lambda proxy integrations (as the Powertools utilities store an API
// Gateway handler's result); they are the stored format, so they do not change. Maps and
// slices have no omitempty, so a replay keeps nil apart from empty.
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

// verdict says how a request is settled by an [httpGuard].
type verdict int

const (
	// guarded: [httpGuard.admit] found the request's key; run it with [httpGuard.run].
	guarded verdict = iota
	// bypassed: the guard does not apply (a method it does not guard, or a missing key
	// that is optional); the caller runs the handler itself, unguarded.
	bypassed
	// ran: the handler ran, and what it returned is the answer.
	ran
	// answered: the response returned with the verdict is the answer (a replay or a
	// refusal).
	answered
	// failed: the error returned with the verdict goes back to the caller's runtime.
	failed
)

// httpGuard applies the HTTP semantics to requests: the one implementation behind every
// HTTP decorator. A request goes through [httpGuard.admit], which finds its key, then,
// once the caller has read its tenant and fingerprint, through [httpGuard.run].
type httpGuard struct {
	g *idem.Guard
	s httpSettings
}

// handlerError carries an error returned by the user's handler through the guard.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// admit returns the key of req and guarded, or bypassed for a request the guard does not
// apply to, or answered and the refusal of a request whose key is missing or invalid. It
// reports an unguarded run (see [reportUnguarded]).
func (s *httpGuard) admit(ctx context.Context, req *httpRequest) (string, verdict, httpResponse) {
	if !s.s.methods[strings.ToUpper(req.method)] {
		return "", bypassed, httpResponse{}
	}
	key, err := parseKey(headerValues(s.s.header, req.headers, req.multiHeaders))
	if err != nil {
		if errors.Is(err, idem.ErrMissingKey) && !s.s.keyRequired {
			reportUnguarded(ctx, s.g, err)
			return "", bypassed, httpResponse{}
		}
		return "", answered, refuseKey(err, s.s.header, req.multiValue)
	}
	return key, guarded, httpResponse{}
}

// run settles an admitted request: r is its key, tenant and fingerprint, and fpErr the
// error of reading the fingerprint, if any. handler runs the handler and returns its
// response; it is called at most once, under the guard. On ran, the caller answers with
// what the handler returned; on answered, with the response; on failed, with the error.
func (s *httpGuard) run(ctx context.Context, req *httpRequest, r idem.Request, fpErr error,
	handler func(context.Context) (httpResponse, error)) (verdict, httpResponse, error) {
	if fpErr != nil {
		detail := "the request could not be fingerprinted"
		if errors.Is(fpErr, errBadBase64) {
			detail = "the request body is marked base64 but does not decode"
		}
		return answered, problem(http.StatusBadRequest, ProblemInvalidRequest, detail, 0, req.multiValue), nil
	}
	handled := false // the handler returned a response
	resp, replayed, err := idem.Do(ctx, s.g, r, func(ctx context.Context) (httpResponse, error) {
		resp, err := handler(ctx)
		if err != nil {
			return httpResponse{}, &handlerError{err}
		}
		handled = true
		if !s.s.cacheable(resp.StatusCode) {
			return resp, ErrNotCacheable
		}
		return resp, nil
	})
	switch {
	case err == nil && replayed:
		resp.markReplayed(req.multiValue)
		return answered, resp, nil
	case err == nil, errors.Is(err, ErrNotCacheable):
		return ran, httpResponse{}, nil
	}
	var he *handlerError
	if errors.As(err, &he) {
		if resp, ok := handlerProblem(ctx, s.g.Logger(), he.err, req.multiValue); ok {
			return answered, resp, nil
		}
		return failed, httpResponse{}, he.err
	}
	if handled && notRecorded(err) {
		// The handler's effects happened, and the guard logged the failure: its response
		// is the truth, and a 503 would tell the client that nothing ran.
		return ran, httpResponse{}, nil
	}
	if resp, ok := guardProblem(ctx, s.g.Logger(), err, s.s.header, req.multiValue); ok {
		return answered, resp, nil
	}
	// No HTTP meaning (a cancelled context, a remembered failure): an invocation error.
	return failed, httpResponse{}, err
}
