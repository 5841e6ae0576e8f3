package httpsem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/idemkit/idem"
)

// ErrNotCacheable is the error a guarded handler's response presents to the guard when
// the settings' Cacheable refuses to store it (by default 5xx, 409 and 429), so the guard
// releases the key and the next retry runs the handler again. The client still gets the
// response. It wraps idem.ErrDoNotStore, so even a guard built with
// idem.WithRememberFailures never stores such a response. Both public packages re-export
// it as one value.
var ErrNotCacheable = fmt.Errorf("idem: HTTP response not cacheable: %w", idem.ErrDoNotStore)

// Verdict says how a request is settled by a [Guard].
type Verdict int

const (
	// Guarded means [Guard.Admit] found the request's key; run it with [Guard.Run].
	Guarded Verdict = iota
	// Bypassed means the guard does not apply (a method it does not guard, or a missing
	// key that is optional); the caller runs the handler itself, unguarded.
	Bypassed
	// Ran means the handler ran, and what it produced is the answer.
	Ran
	// Answered means the response returned with the verdict is the answer (a replay or a
	// refusal).
	Answered
	// Failed means the error returned with the verdict has no HTTP meaning; the caller
	// fails the request its own way.
	Failed
)

// Guard applies the HTTP semantics to requests: the one implementation behind every HTTP
// wrapper. A request goes through [Guard.Admit], which finds its key, then, once the
// caller has read its tenant and fingerprint, through [Guard.Run]. It is safe for
// concurrent use.
type Guard struct {
	g *idem.Guard
	s Settings
}

// NewGuard returns the semantics s applied with g.
func NewGuard(g *idem.Guard, s Settings) *Guard { return &Guard{g: g, s: s} }

// abortedError is what a run that gave up presents to the guard: it answered nothing (a
// response without a status). It wraps idem.ErrDoNotStore, so the key is released and
// nothing is stored, whatever idem.WithRememberFailures says, and the cause of the
// handler's context, if it ended.
type abortedError struct{ cause error }

func (e *abortedError) Error() string {
	if e.cause == nil {
		return "idem: the handler answered no status"
	}
	return "idem: the handler's context ended and it answered no status: " + e.cause.Error()
}

func (e *abortedError) Unwrap() []error {
	if e.cause == nil {
		return []error{idem.ErrDoNotStore}
	}
	return []error{idem.ErrDoNotStore, e.cause}
}

// handlerError carries an error returned by the user's handler through the guard.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// Admit returns the key of req and Guarded, or Bypassed for a request the guard does not
// apply to, or Answered and the refusal of a request whose key is missing or invalid. It
// reports an unguarded run (see [ReportUnguarded]).
func (s *Guard) Admit(ctx context.Context, req *Request) (string, Verdict, Response) {
	if !s.s.Methods[strings.ToUpper(req.Method)] {
		return "", Bypassed, Response{}
	}
	key, err := parseKey(headerValues(s.s.Header, req.Headers, req.MultiHeaders))
	if err != nil {
		if errors.Is(err, idem.ErrMissingKey) && !s.s.KeyRequired {
			ReportUnguarded(ctx, s.s.Package, s.g, err)
			return "", Bypassed, Response{}
		}
		return "", Answered, s.refuseKey(err, req.MultiValue)
	}
	return key, Guarded, Response{}
}

// Run settles an admitted request: r is its key, tenant and fingerprint, and fpErr the
// error of reading the fingerprint, if any. handler runs the handler and returns its
// response; it is called at most once, under the guard. A response whose NotStored is set
// is recorded as such (see [Response]), and answered on replay as a result too large to
// store. A response without a status (StatusCode 0) means the run gave up, whether the
// handler's context ended or not (no HTTP response has status 0: API Gateway answers it
// 502): nothing is stored, the key is released, and the answer is 503 [ProblemAborted].
// On Ran, the caller answers with what the handler produced; on Answered, with the
// response; on Failed, with the error.
func (s *Guard) Run(ctx context.Context, req *Request, r idem.Request, fpErr error,
	handler func(context.Context) (Response, error)) (Verdict, Response, error) {
	if fpErr != nil {
		detail := "the request could not be fingerprinted"
		if errors.Is(fpErr, errBadBase64) {
			detail = "the request body is marked base64 but does not decode"
		}
		return Answered, s.Problem(http.StatusBadRequest, ProblemInvalidRequest, detail, 0, req.MultiValue), nil
	}
	handled := false     // the handler returned a response
	var answer *Response // the answer chosen for attached writes refused for good
	resp, replayed, err := idem.Do(ctx, s.g, r, func(ctx context.Context) (Response, error) {
		resp, err := handler(ctx)
		if err != nil {
			return Response{}, &handlerError{err}
		}
		if resp.StatusCode == 0 {
			// No answer: the run gave up (its context ended, the lease ran out or a
			// deadline of its own passed). Stored, the empty answer would be replayed as
			// the outcome of work that was never done; and no client can be answered
			// status 0. idemhttp passes one only when the handler's context ended.
			var cause error
			if ctx.Err() != nil {
				cause = context.Cause(ctx)
			}
			return Response{}, &abortedError{cause: cause}
		}
		handled = true
		if !s.s.Cacheable(resp.StatusCode) {
			return resp, ErrNotCacheable
		}
		if resp.NotStored {
			// The client has the response already (it streamed): should the store refuse
			// the attached writes for good, the key completes as sent all the same, so
			// that the handler never runs twice for it; a retry is answered not
			// replayable. Releasing would run it again, as for no other streamed run.
			// The handler's context holds the lease until it returns: this cannot fail.
			_ = idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return resp, true })
		} else {
			s.onRefused(ctx, req.MultiValue, &answer)
		}
		return resp, nil
	})
	if answer != nil && ((err == nil && reflect.DeepEqual(resp, *answer)) || idem.IsRefused(err)) {
		// The store refused the handler's attached writes for good, and the answer chosen
		// for that is the request's: stored (Do returned it), or not (not cacheable: the
		// key was released, nothing committed). Otherwise the key holds the handler's own
		// response (an attempt of its completion landed after all), or whether it does is
		// not known (503), or the lease was lost: answered as any other outcome.
		return Answered, *answer, nil
	}
	switch {
	case err == nil && replayed && resp.NotStored:
		// Recorded as done without its response, as the guard records a result too large
		// to store: answered as that is.
		err = idem.ErrResultNotStored
	case err == nil && replayed:
		resp.markReplayed(req.MultiValue)
		return Answered, resp, nil
	case err == nil, errors.Is(err, ErrNotCacheable):
		return Ran, Response{}, nil
	}
	var aborted *abortedError
	if errors.As(err, &aborted) {
		s.g.Logger().WarnContext(ctx, s.s.Package+": the handler gave up, answering no status; nothing stored, the key released", "error", err)
		return Answered, s.refused(ctx, r, ReasonAborted, err, s.Problem(http.StatusServiceUnavailable, ProblemAborted,
			"the request's run ended before it answered; nothing was stored, and a retry runs it again", StoreRetryAfter, req.MultiValue)), nil
	}
	var he *handlerError
	if errors.As(err, &he) {
		if resp, ok := s.handlerProblem(ctx, he.err, req.MultiValue); ok {
			return Answered, s.refused(ctx, r, RefusalReason(he.err), he.err, resp), nil
		}
		return Failed, Response{}, he.err
	}
	if handled && NotRecorded(err) {
		// The handler's effects happened, and the guard logged the failure: its response
		// is the truth, and a 503 would tell the client that nothing ran.
		return Ran, Response{}, nil
	}
	if resp, ok := s.guardProblem(ctx, err, req.MultiValue); ok {
		return Answered, s.refused(ctx, r, RefusalReason(err), err, resp), nil
	}
	// No HTTP meaning (a cancelled context, a remembered failure): the caller's to fail.
	LogRefusal(ctx, s.s.Package, s.g, r, RefusalReason(err), 0, err)
	return Failed, Response{}, err
}
