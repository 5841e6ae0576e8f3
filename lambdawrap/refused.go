package lambdawrap

import (
	"context"

	"github.com/idemkit/idem/internal/httpsem"
)

// Problem is an RFC 9457 problem details answer, sent as application/problem+json, that a
// [WithRefused] function chooses for a request whose attached writes the store refused for
// good.
type Problem struct {
	// Status is the response's status code, 400 to 599. Whether the answer is stored and
	// replayed follows [WithCacheable], as for any response: by default every 4xx but 409
	// and 429 is. Another value is no choice, and the default answer stands.
	Status int
	// Type is a URI reference that names the problem type; "" is "about:blank".
	Type string
	// Title is a short summary of the problem type; "" is the status's text.
	Title string
	// Detail explains this occurrence; left out when "". Say what the client can fix,
	// never a value it did not send.
	Detail string
}

// WithRefused sets how a request is answered whose attached writes (idem.Attach, dynamo.Attach)
// the store refused for good, as idem.IsRefused tells: a condition on a business item
// failed (a balance too low), a constraint was violated (a CHECK on the currency). The
// handler ran and answered, say, 201, but nothing of it committed. refused gets the
// request's context and the store's error (errors.As reaches the store's
// AttachedWriteError and the driver's error) and returns the problem to answer, and true;
// or false for the default. refused must not be nil, and must be safe for concurrent use.
//   - The answer is recorded as a handler's 4xx is: a retry gets it back, with
//     Idempotent-Replayed, without running the handler again. It is safe as nothing
//     committed: the guard completes the key with it under the same lease, conditional
//     on the record being in progress (see idem.OnRefused).
//   - If an attempt of the refused completion landed first, the handler's own response
//     stands and is the answer; if whether one did is not known, 503
//     [ProblemOutcomeUnknown]. A status WithCacheable does not store is answered,
//     nothing stored, and the key released.
//   - Default none: 409 [ProblemAttachedWriteFailed], nothing stored, and a retry runs
//     again. A refusal that may not recur (a conflict, throttling: 503
//     [ProblemNotCommitted]) never asks refused.
func WithRefused(refused func(ctx context.Context, err error) (Problem, bool)) HTTPOption {
	return func(s *httpSettings) error {
		if refused == nil {
			return s.SetRefused(nil)
		}
		return s.SetRefused(func(ctx context.Context, err error) (httpsem.Refusal, bool) {
			p, ok := refused(ctx, err)
			return httpsem.Refusal(p), ok
		})
	}
}
