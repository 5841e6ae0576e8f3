package idemhttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpsem"
)

// errHijacked is what a guarded run that hijacked the connection presents to the guard: it
// wraps idem.ErrDoNotStore, so the key is released and nothing is stored, whatever
// idem.WithRememberFailures says.
var errHijacked = fmt.Errorf("idemhttp: the handler hijacked the connection: %w", idem.ErrDoNotStore)

// recorder is the http.ResponseWriter a guarded handler writes to. It holds the response
// back (status, a snapshot of the headers at WriteHeader, body) until the guard has
// recorded the outcome, so that the client gets what the outcome means: the response, or
// the 503 of a store that committed nothing. A flush, or a body over max, sends the
// response as it is written from then on (passed). A hijack gives the connection away.
// It is used by one handler goroutine, as a ResponseWriter is.
type recorder struct {
	w      http.ResponseWriter
	max    int
	header http.Header // the map the handler sets
	sent   http.Header // header as of WriteHeader: the response's headers
	status int         // 0 until WriteHeader
	body   bytes.Buffer
	// passed: status, headers and body so far went to w, and later writes go straight
	// there.
	passed   bool
	hijacked bool
}

func newRecorder(w http.ResponseWriter, max int) *recorder {
	return &recorder{w: w, max: max, header: make(http.Header)}
}

// Header returns the header map the handler sets; like net/http's, changes after
// WriteHeader do not change the response, except trailers.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader records the status and the headers as they are now. An informational
// status (1xx but 101) goes to the client at once, with the headers set so far, and is
// not recorded; a second final status is ignored, as net/http ignores it.
func (r *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	if r.status != 0 || r.hijacked {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		// The hint goes out with the headers set so far; net/http keeps its header map after
		// a 1xx, so it is put back as it was: the final response carries only what the
		// handler has set when it is written, as its replay does.
		h := r.w.Header()
		before := h.Clone()
		copyHeader(h, r.header)
		r.w.WriteHeader(code)
		clear(h)
		copyHeader(h, before)
		return
	}
	r.status, r.sent = code, r.header.Clone()
}

// Write holds p back, or sends it if the response is passed through, or now exceeds max.
func (r *recorder) Write(p []byte) (int, error) {
	if r.hijacked {
		return 0, http.ErrHijacked
	}
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(r.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if !r.passed && r.body.Len()+len(p) > r.max {
		r.passThrough()
	}
	if r.passed {
		return r.w.Write(p)
	}
	return r.body.Write(p)
}

// Flush sends the response so far and passes the rest through: the handler streams.
func (r *recorder) Flush() { _ = r.FlushError() }

// FlushError is Flush, with the error of flushing the connection; http.ResponseController
// calls it.
func (r *recorder) FlushError() error {
	if r.hijacked {
		return http.ErrHijacked
	}
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.passThrough()
	return http.NewResponseController(r.w).Flush()
}

// Hijack gives the handler the connection, if the server's writer allows it. The response
// is then the handler's own business: nothing is recorded, and the key is released.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.w).Hijack()
	if err == nil {
		r.hijacked = true
	}
	return conn, rw, err
}

// Unwrap returns the server's writer, so that http.ResponseController reaches the
// deadlines and full duplex of the connection. Writes to it bypass the middleware.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// passThrough sends what is held back and makes later writes go straight to the client.
func (r *recorder) passThrough() {
	if r.passed {
		return
	}
	r.passed = true
	copyHeader(r.w.Header(), r.sent)
	r.w.WriteHeader(r.status)
	if r.body.Len() > 0 {
		_, _ = r.w.Write(r.body.Bytes()) // a write error shows again in the handler's next one
	}
	r.body = bytes.Buffer{}
}

// empty reports whether the handler wrote nothing: no final status, no body, no flush, no
// hijack (an informational status is no answer).
func (r *recorder) empty() bool { return r.status == 0 && !r.hijacked }

// response returns what the guard records of the handler's response: the response, or
// with NotStored when it was passed through or has trailers (which the stored form does
// not carry), or errHijacked.
func (r *recorder) response() (httpsem.Response, error) {
	if r.hijacked {
		return httpsem.Response{}, errHijacked
	}
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.passed || r.hasTrailers() {
		return httpsem.Response{StatusCode: r.status, NotStored: true}, nil
	}
	resp := httpsem.Response{StatusCode: r.status, MultiValueHeaders: r.sent, MultiValueHeadersBase64: binaryHeaders(r.sent)}
	if b := r.body.Bytes(); utf8.Valid(b) {
		resp.Body = string(b)
	} else {
		// Stored as JSON, where a string holds only valid UTF-8.
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return resp, nil
}

// binaryHeaders returns the headers of h that have a value that is not UTF-8, each value
// base64-encoded, so that they are stored byte for byte (see
// httpsem.Response.MultiValueHeadersBase64); nil when every value is UTF-8.
func binaryHeaders(h http.Header) map[string][]string {
	var out map[string][]string
	for k, vs := range h {
		if !slices.ContainsFunc(vs, func(v string) bool { return !utf8.ValidString(v) }) {
			continue
		}
		if out == nil {
			out = make(map[string][]string, 1)
		}
		enc := make([]string, len(vs))
		for i, v := range vs {
			enc[i] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		out[k] = enc
	}
	return out
}

// commit sends the response held back, or ends one passed through with its trailers.
func (r *recorder) commit() {
	if !r.passed {
		writeResponse(r.w, r.sent, r.status, r.body.Bytes())
	}
	r.writeTrailers()
}

// hasTrailers reports whether the handler declared or set trailers.
func (r *recorder) hasTrailers() bool {
	if len(r.sent["Trailer"]) > 0 {
		return true
	}
	for k := range r.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// writeTrailers sets the trailers the handler set, for net/http to send after the body:
// the headers declared in Trailer, and those named with http.TrailerPrefix.
func (r *recorder) writeTrailers() {
	h := r.w.Header()
	for _, names := range r.sent["Trailer"] {
		for _, k := range strings.Split(names, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if vs, ok := r.header[k]; ok {
				h[k] = vs
			}
		}
	}
	for k, vs := range r.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			h[k] = vs
		}
	}
}

// write sends a stored or built response: a replay or a problem. A body or header value
// stored as base64 that does not decode (a corrupt record: its JSON decoded) is answered
// as a record that cannot be replayed.
func (m *middleware) write(ctx context.Context, w http.ResponseWriter, resp *httpsem.Response) {
	h, body, err := decodeResponse(resp)
	if err != nil {
		m.g.Logger().ErrorContext(ctx, pkg+": completed response cannot be replayed", "error", err)
		p := m.guard.Problem(http.StatusInternalServerError, httpsem.ProblemNotReplayable,
			"the request with this idempotency key completed, but its response cannot be replayed", 0, true)
		h, body, _ = decodeResponse(&p)
		resp = &p
	}
	writeResponse(w, h, resp.StatusCode, body)
}

// decodeResponse returns the headers and body of a stored or built response, with the
// bytes that its JSON form carries in base64. It fails on base64 that does not decode (a
// corrupt record: its JSON decoded).
func decodeResponse(resp *httpsem.Response) (http.Header, []byte, error) {
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return nil, nil, fmt.Errorf("idemhttp: body: %w", err)
		}
	}
	h := make(http.Header, len(resp.Headers)+len(resp.MultiValueHeaders)+1)
	for k, v := range resp.Headers { // a record written by lambdawrap for the same operation
		h[k] = []string{v}
	}
	copyHeader(h, resp.MultiValueHeaders)
	for k, enc := range resp.MultiValueHeadersBase64 {
		vs := make([]string, len(enc))
		for i, e := range enc {
			v, err := base64.StdEncoding.DecodeString(e)
			if err != nil {
				return nil, nil, fmt.Errorf("idemhttp: header %s: %w", k, err)
			}
			vs[i] = string(v)
		}
		h[k] = vs
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	return h, body, nil
}

// writeResponse sends a whole response: header's values replace any the server's writer
// holds under the same names.
func writeResponse(w http.ResponseWriter, header http.Header, status int, body []byte) {
	copyHeader(w.Header(), header)
	w.WriteHeader(status)
	if len(body) > 0 {
		_, _ = w.Write(body) // the client may be gone; nothing left to tell it
	}
}

// copyHeader sets every header of src in dst, values in order, names as they are (not
// canonicalised again), so a replay carries them exactly.
func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

// bodyAllowed reports whether a response with this status may have a body, as net/http
// says (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
