package lambdawrap

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"strings"
)

// errBadBase64 refuses an event that says its body is base64 when it is not. API Gateway
// never sends one; a hand-made or corrupted event can.
var errBadBase64 = errors.New("lambdawrap: the request body is marked base64 but does not decode")

// fingerprint is the default identity of an HTTP request's content: its method, path,
// canonical query string and canonical body, each length-prefixed so that no two requests
// run together into the same bytes.
func (r *httpRequest) fingerprint() ([]byte, error) {
	body, err := r.decodedBody()
	if err != nil {
		return nil, err
	}
	body = canonicalBody(body)
	parts := [...][]byte{[]byte(strings.ToUpper(r.method)), []byte(r.path), []byte(r.canonicalQuery()), body}
	n := 0
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out, nil
}

// decodedBody returns the body's bytes, decoded from base64 when the event says so.
func (r *httpRequest) decodedBody() ([]byte, error) {
	if !r.base64 {
		return []byte(r.body), nil
	}
	b, err := base64.StdEncoding.DecodeString(r.body)
	if err != nil {
		return nil, errBadBase64
	}
	return b, nil
}

// canonicalQuery encodes the query parameters sorted by name, values in the order given.
func (r *httpRequest) canonicalQuery() string {
	switch {
	case r.rawQuery != "":
		return canonicalRawQuery(r.rawQuery)
	case len(r.multiQuery) > 0:
		return url.Values(r.multiQuery).Encode()
	case len(r.query) > 0:
		return url.Values(singleToMulti(r.query)).Encode()
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
