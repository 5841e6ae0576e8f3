package lambdawrap

import (
	"context"
	"net/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsem"
)

// shape converts one event type and its response type to and from the shared form.
type shape[In, Out any] struct {
	name     string
	request  func(*In) httpsem.Request
	tenant   func(In) (string, error) // the default: an error wraps ErrUnknownCaller
	toHTTP   func(*Out) httpsem.Response
	fromHTTP func(*httpsem.Response) Out
}

// httpWrapper adapts the handler of one event shape to the [httpsem.Guard].
type httpWrapper[In, Out any] struct {
	g           *idem.Guard
	guard       *httpsem.Guard
	h           func(context.Context, In) (Out, error)
	s           shape[In, Out]
	tenant      func(In) (string, error)
	fingerprint func(In) ([]byte, error) // nil: the request's default fingerprint
}

// decorate returns h guarded, for the event shape s. Each HTTP decorator calls it with its
// options and with set, the method of its option interface.
func decorate[In, Out, O any](g *idem.Guard, h func(context.Context, In) (Out, error), s shape[In, Out], opts []O,
	set func(O, *httpConfig[In]) error) (func(context.Context, In) (Out, error), error) {
	if g == nil || h == nil {
		return nil, optErr(s.name, "guard and handler must not be nil")
	}
	c := httpConfig[In]{http: httpsem.DefaultSettings(pkg)}
	if err := apply(&c, opts, set); err != nil {
		return nil, err
	}
	w := &httpWrapper[In, Out]{g: g, guard: httpsem.NewGuard(g, c.http), h: h, s: s, tenant: s.tenant, fingerprint: c.event.fingerprint}
	if t := c.event.tenant; t != nil {
		// The user's own reading of the caller: trusted, an empty tenant included.
		w.tenant = func(in In) (string, error) { return t(in), nil }
	}
	return w.handle, nil
}

// handle answers as the package documentation's HTTP semantics say.
func (w *httpWrapper[In, Out]) handle(ctx context.Context, in In) (Out, error) {
	req := w.s.request(&in)
	key, v, resp := w.guard.Admit(ctx, &req)
	if v == httpsem.Bypassed {
		return w.h(ctx, in)
	}
	if v == httpsem.Answered {
		return w.reply(resp)
	}
	tenant, err := w.tenant(in)
	if err != nil {
		return w.reply(w.unknownCaller(ctx, &req, err))
	}
	r := idem.Request{Key: key, Tenant: tenant}
	if w.fingerprint != nil {
		r.Fingerprint, err = w.fingerprint(in)
	} else {
		r.Fingerprint, err = req.Fingerprint()
	}
	var first Out // exactly what the handler returned
	v, resp, err = w.guard.Run(ctx, &req, r, err, func(ctx context.Context) (httpsem.Response, error) {
		out, err := w.h(ctx, in)
		if err != nil {
			return httpsem.Response{}, err
		}
		first = out
		return w.s.toHTTP(&out), nil
	})
	switch v {
	case httpsem.Ran:
		return first, nil
	case httpsem.Answered:
		return w.reply(resp)
	}
	var zero Out
	return zero, err
}

// unknownCaller refuses an authenticated request without a caller identity.
// Scoped by the empty tenant, it would share its records with every other such caller. So
// one could be replayed another's response. The function's configuration is at fault. So
// the answer is 500, and the refusal is logged at ERROR and reported through the guard's
// OnUnguarded hook.
func (w *httpWrapper[In, Out]) unknownCaller(ctx context.Context, req *httpsem.Request, err error) httpsem.Response {
	w.g.Logger().ErrorContext(ctx, pkg+": refusing an authenticated request without a caller identity; scope requests with WithTenant", "error", err)
	if on := w.g.Hooks().OnUnguarded; on != nil {
		on(ctx, idem.Event{Err: err})
	}
	return w.guard.Problem(http.StatusInternalServerError, httpsem.ProblemUnknownCaller,
		"the request is authenticated, but the function finds no caller identity in it to scope its idempotency key by", 0, req.MultiValue)
}

// reply answers with r, converted to the event's response type.
func (w *httpWrapper[In, Out]) reply(r httpsem.Response) (Out, error) { return w.s.fromHTTP(&r), nil }

// v1Request maps the fields of payload format 1.0 events (REST APIs, load balancers).
func v1Request(method, path string, query map[string]string, multiQuery map[string][]string,
	headers map[string]string, multiHeaders map[string][]string, body string, base64 bool) httpsem.Request {
	return httpsem.Request{Method: method, Path: path, Query: query, MultiQuery: multiQuery,
		Headers: headers, MultiHeaders: multiHeaders, Body: body, Base64: base64}
}

// v2Request maps the fields of payload format 2.0 events (HTTP APIs, function URLs).
func v2Request(method, rawPath, rawQuery string, headers map[string]string, body string, base64 bool) httpsem.Request {
	return httpsem.Request{Method: method, Path: rawPath, RawQuery: rawQuery,
		Headers: headers, Body: body, Base64: base64}
}
