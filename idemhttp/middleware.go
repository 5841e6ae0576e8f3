package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsem"
)

// Middleware returns a net/http middleware that makes the handlers it wraps idempotent, as
// the package documentation describes. A guarded request runs its handler at most once per
// key within the guard's expiry window; every retry gets the first response back, byte for
// byte, with "Idempotent-Replayed: true". The key is in the Idempotency-Key header (see
// [WithHeader]), scoped by the guard's operation and by the tenant of [WithTenant], if
// given. Mount http.TimeoutHandler, and any wrapper that answers while the handler goes
// on, outside it (see "Where to mount it" in the package doc).
//
// It logs and reports through the guard (idem.WithLogger, idem.WithHooks), naming a
// request by its stored key, never by the raw key, which may be personal data. It returns
// an error wrapping idem.ErrInvalidOption if g is nil or an option is invalid. The
// middleware, and each handler it returns, is safe for concurrent use.
func Middleware(g *idem.Guard, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := config{http: httpsem.DefaultSettings(pkg), maxRequest: DefaultMaxRequestBody, maxResponse: DefaultMaxResponseBody}
	if g == nil {
		return nil, c.http.OptionError("Middleware", "guard must not be nil")
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	m := &middleware{g: g, guard: httpsem.NewGuard(g, c.http), c: c}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(next, w, r) })
	}, nil
}

// middleware is the configuration a Middleware's handlers share.
type middleware struct {
	g     *idem.Guard
	guard *httpsem.Guard
	c     config
}

// serve implements the semantics table of the package documentation for one request.
func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req := httpsem.Request{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
		MultiHeaders: r.Header, MultiValue: true}
	key, v, resp := m.guard.Admit(ctx, &req)
	switch v {
	case httpsem.Bypassed:
		next.ServeHTTP(w, r)
		return
	case httpsem.Answered:
		m.write(ctx, w, &resp)
		return
	}
	body, refused := m.readBody(w, r)
	if refused != nil {
		m.write(ctx, w, refused)
		return
	}
	ir := idem.Request{Key: key, Fingerprint: req.FingerprintBody(body)}
	if m.c.tenant != nil {
		ir.Tenant = m.c.tenant(r)
	}
	rec := newRecorder(w, m.c.maxResponse)
	runCtx, started, stop := untilStarted(ctx)
	defer stop()
	var panicked any // a panic after the response went out, raised again once recorded
	v, resp, err := m.guard.Run(runCtx, &req, ir, nil, func(ctx context.Context) (out httpsem.Response, err error) {
		started()
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if !rec.passed {
				panic(p) // nothing sent: the guard releases the key, and the panic goes on
			}
			// Part of the response reached the client (it streamed): the run is recorded
			// as a streamed one, so that a retry never runs it again, and the panic goes
			// on once it is.
			panicked = p
			if p != http.ErrAbortHandler { //nolint:errorlint // net/http compares the value itself
				m.g.Logger().ErrorContext(ctx, pkg+": the handler panicked after its response was sent; recorded as sent",
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			out, err = rec.response()
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
		if ended(ctx) && rec.empty() {
			// The handler gave up when its context ended, net/http's way: it wrote
			// nothing. That is no 200 to store; no status tells httpsem so.
			return httpsem.Response{}, nil
		}
		return rec.response()
	})
	switch {
	case rec.hijacked: // the connection is the handler's
	case v == httpsem.Ran:
		rec.commit()
	case rec.passed:
		// The response went out as it was written, before the outcome was known: what the
		// outcome means can no longer be answered, so it is logged instead, under the
		// stored key as the guard logs it: a raw key (which may be personal data) never
		// reaches a log line.
		stored, _ := m.g.StoredKey(ir) // the guard accepted this key
		m.g.Logger().ErrorContext(ctx, pkg+": response already sent as written; the outcome's answer is lost",
			"key", stored, "status", resp.StatusCode, "error", err)
	case v == httpsem.Answered:
		m.write(ctx, w, &resp)
	default: // Failed: an error with no HTTP meaning, a cancelled context say
		level := slog.LevelError
		if ctx.Err() != nil {
			level = slog.LevelWarn // the client went away, or a server timeout ended the request
		}
		m.g.Logger().Log(ctx, level, pkg+": request failed", "error", err)
		p := m.guard.Problem(http.StatusInternalServerError, "", "", 0, true)
		m.write(ctx, w, &p)
	}
	if panicked != nil {
		panic(panicked)
	}
}

// readBody reads a guarded request's body to fingerprint it, and puts it back for the
// handler. A body that is too large or cannot be read is refused with the returned
// response.
func (m *middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpsem.Response) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.c.maxRequest))
	if err != nil {
		var tooLarge *http.MaxBytesError
		p := m.guard.Problem(http.StatusBadRequest, httpsem.ProblemInvalidRequest, "the request body could not be read", 0, true)
		if errors.As(err, &tooLarge) {
			p = m.guard.Problem(http.StatusRequestEntityTooLarge, httpsem.ProblemRequestTooLarge,
				"the request body is larger than "+strconv.FormatInt(m.c.maxRequest, 10)+" bytes, the most read to fingerprint a request", 0, true)
		}
		return nil, &p
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// ended reports whether ctx has ended, or its deadline has passed: a context's Err stays
// nil until the timer of its deadline has run, and an http.TimeoutHandler around the
// middleware may have answered at that deadline, on a timer of its own, and the handler
// returned after that answer, before this one ran.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// untilStarted returns a context with ctx's values that ctx's cancellation (the client
// hanging up) ends only until started is called, when the guarded handler starts: a client
// that goes away stops a claim or a wait for an in-flight key, but not a run that holds
// the key. Such a run goes on under its lease (and heartbeat), as it would have, so the
// client's retry is told 409 and then replays its result, instead of meeting a half-done
// run whose lease was let go. stop releases the context's resources.
func untilStarted(ctx context.Context) (run context.Context, started, stop func()) {
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if d, ok := ctx.Deadline(); ok {
		// A server's deadline (http.TimeoutHandler, say) still bounds the run and its lease.
		var cancelDeadline context.CancelFunc
		run, cancelDeadline = context.WithDeadline(run, d)
		stopBoth := cancel
		cancel = func() { cancelDeadline(); stopBoth() }
	}
	var once sync.Once
	detached := make(chan struct{})
	started = func() { once.Do(func() { close(detached) }) }
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-detached:
			default:
				cancel()
			}
		case <-detached:
		case <-run.Done():
		}
	}()
	return run, started, cancel
}
