package httpsem

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/idemkit/idem"
)

// Refusal is the answer a handler's author chose for a request whose attached writes the
// store refused for good (idem.IsRefused): an RFC 9457 problem. The public packages each
// have their own Problem type, converted to it.
type Refusal struct {
	Status              int
	Type, Title, Detail string
}

// SetRefused sets the function that chooses the answer to a request whose attached writes
// the store refused for good; refused must not be nil.
func (s *Settings) SetRefused(refused func(ctx context.Context, err error) (Refusal, bool)) error {
	if refused == nil {
		return s.OptionError("WithRefused", "must not be nil")
	}
	s.Refused = refused
	return nil
}

// onRefused registers, in the guarded handler's context ctx, the settings' Refused
// function with the guard (idem.OnRefused), if there is one: should the store refuse the
// handler's attached writes for good, the problem it chooses is what the key completes
// with, if Cacheable stores its status, and *answer is set to it, the request's answer
// whether stored or not. A status out of 400 to 599 is no choice: the default answer
// stands.
func (s *Guard) onRefused(ctx context.Context, multi bool, answer **Response) {
	if s.s.Refused == nil {
		return
	}
	// The handler's context holds the lease until the handler returns: it cannot fail.
	_ = idem.OnRefused(ctx, func(ctx context.Context, err error) (any, bool) {
		p, ok := s.s.Refused(ctx, err)
		if !ok || p.Status < 400 || p.Status > 599 {
			return nil, false
		}
		r := s.refusalProblem(p, multi)
		*answer = &r
		return r, s.s.Cacheable(p.Status)
	})
}

// refusalProblem builds the problem+json response of p.
func (s *Guard) refusalProblem(p Refusal, multi bool) Response {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	// Marshal cannot fail: the body holds strings and an int.
	body, _ := json.Marshal(problemBody{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail})
	r := Response{
		StatusCode:        p.Status,
		StatusDescription: strconv.Itoa(p.Status) + " " + http.StatusText(p.Status),
		Body:              string(body),
	}
	if multi {
		r.MultiValueHeaders = map[string][]string{"Content-Type": {problemContentType}}
	} else {
		r.Headers = map[string]string{"Content-Type": problemContentType}
	}
	return r
}
