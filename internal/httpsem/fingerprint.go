package httpsem

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"strings"
)

// Request is what the guard reads from a request, whatever its shape.
type Request struct {
	Method string
	Path   string
	// The query string: raw in payload format 2.0 and net/http, as maps in 1.0. Only the
	// fingerprint reads it, so it is canonicalised there, off the pass-through path.
	RawQuery     string
	Query        map[string]string
	MultiQuery   map[string][]string
	Headers      map[string]string
	MultiHeaders map[string][]string
	// Body is the body as the event carries it, decoded from base64 when Base64 is set.
	// A wrapper that holds the body's bytes passes them to [Request.FingerprintBody].
	Body   string
	Base64 bool
	// MultiValue is set where responses carry their headers in MultiValueHeaders only:
	// an ALB target group with multi-value headers, and net/http.
	MultiValue bool
}

// errBadBase64 refuses an event that says its body is base64 when it is not. API Gateway
// never sends one; a hand-made or corrupted event can.
var errBadBase64 = errors.New("httpsem: the request body is marked base64 but does not decode")

// Fingerprint is the default identity of a request's content: its method, path, canonical
// query string and canonical body (see [Request.FingerprintBody]), the body decoded from
// base64 when the request says so. An error means the body does not decode.
func (r *Request) Fingerprint() ([]byte, error) {
	body, err := r.decodedBody()
	if err != nil {
		return nil, err
	}
	return r.FingerprintBody(body), nil
}

// FingerprintBody is [Request.Fingerprint] with body as the request's body: the method,
// path, canonical query string and canonical body (see canonicalBody), each
// length-prefixed so that no two requests run together into the same bytes.
func (r *Request) FingerprintBody(body []byte) []byte {
	body = canonicalBody(body)
	parts := [...][]byte{[]byte(strings.ToUpper(r.Method)), []byte(r.Path), []byte(r.canonicalQuery()), body}
	n := 0
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

// decodedBody returns the body's bytes, decoded from base64 when the event says so.
func (r *Request) decodedBody() ([]byte, error) {
	if !r.Base64 {
		return []byte(r.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(r.Body)
	if err != nil {
		return nil, errBadBase64
	}
	return b, nil
}

// canonicalQuery encodes the query parameters sorted by name, values in the order given.
func (r *Request) canonicalQuery() string {
	switch {
	case r.RawQuery != "":
		return canonicalRawQuery(r.RawQuery)
	case len(r.MultiQuery) > 0:
		return url.Values(r.MultiQuery).Encode()
	case len(r.Query) > 0:
		return url.Values(singleToMulti(r.Query)).Encode()
	}
	return ""
}

// canonicalRawQuery canonicalises a raw query string; one that does not parse is kept as
// it is, which still tells two requests apart.
func canonicalRawQuery(raw string) string {
	if raw == "" {
		return ""
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	return v.Encode()
}

// singleToMulti turns a single-value parameter map into the multi-value shape.
func singleToMulti(single map[string]string) map[string][]string {
	if len(single) == 0 {
		return nil
	}
	m := make(map[string][]string, len(single))
	for k, v := range single {
		m[k] = []string{v}
	}
	return m
}
