package httpsem

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := Request{Method: "POST", Path: "/orders", RawQuery: "b=2&a=1", Body: `{"sku":"A","qty":2}`}
	tests := []struct {
		name string
		edit func(r *Request)
		same bool
	}{
		{name: "identical", edit: func(*Request) {}, same: true},
		{name: "keys reordered", edit: func(r *Request) { r.Body = `{"qty":2,"sku":"A"}` }, same: true},
		{name: "white space", edit: func(r *Request) { r.Body = "{\n  \"sku\": \"A\",\n  \"qty\": 2\n}\n" }, same: true},
		{name: "base64 of the same body", edit: func(r *Request) {
			r.Body, r.Base64 = base64.StdEncoding.EncodeToString([]byte(`{"qty":2,"sku":"A"}`)), true
		}, same: true},
		{name: "escaped the same", edit: func(r *Request) { r.Body = `{"sku":"\u0041","qty":2}` }, same: true},
		{name: "lower-case method", edit: func(r *Request) { r.Method = "post" }, same: true},
		{name: "other value", edit: func(r *Request) { r.Body = `{"sku":"A","qty":3}` }},
		{name: "number written otherwise", edit: func(r *Request) { r.Body = `{"sku":"A","qty":2.0}` }},
		{name: "other method", edit: func(r *Request) { r.Method = "PATCH" }},
		{name: "other path", edit: func(r *Request) { r.Path = "/orders/1" }},
		{name: "query reordered", edit: func(r *Request) { r.RawQuery = "a=1&b=2" }, same: true},
		{name: "query as a map", edit: func(r *Request) { r.RawQuery, r.Query = "", map[string]string{"a": "1", "b": "2"} }, same: true},
		{name: "query as a multi-value map", edit: func(r *Request) {
			r.RawQuery, r.MultiQuery = "", map[string][]string{"a": {"1"}, "b": {"2"}}
		}, same: true},
		{name: "other query", edit: func(r *Request) { r.RawQuery = "b=2&a=2" }},
		{name: "path into query", edit: func(r *Request) { r.Path, r.RawQuery = "/ordersa=1&b=2", "" }},
		{name: "empty body", edit: func(r *Request) { r.Body = "" }},
	}
	want, err := base.Fingerprint()
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := base
			tc.edit(&r)
			got, err := r.Fingerprint()
			require.NoError(t, err)
			if tc.same {
				assert.Equal(t, want, got)
			} else {
				assert.NotEqual(t, want, got)
			}
		})
	}
	_, err = (&Request{Body: "%%%", Base64: true}).Fingerprint()
	require.ErrorIs(t, err, errBadBase64)
}

func TestCanonicalQuery(t *testing.T) {
	t.Parallel()
	multi := Request{MultiQuery: map[string][]string{"a": {"1", "0"}, "b": {"2"}}}
	assert.Equal(t, canonicalRawQuery("b=2&a=1&a=0"), multi.canonicalQuery())
	assert.Equal(t, "", canonicalRawQuery(""))
	assert.Equal(t, "%zz", canonicalRawQuery("%zz"), "unparseable query kept as it is")
}

// fixtureBodies returns the request bodies of the fixtures, decoded from base64 if flagged.
func fixtureBodies(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, ev := range fixtureEvents(tb) {
		r := Request{Body: ev.Body, Base64: ev.IsBase64Encoded}
		body, err := r.decodedBody()
		require.NoError(tb, err)
		out = append(out, string(body))
	}
	return out
}
