package lambdawrap

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := httpRequest{method: "POST", path: "/orders", rawQuery: "b=2&a=1", body: `{"sku":"A","qty":2}`}
	tests := []struct {
		name string
		edit func(r *httpRequest)
		same bool
	}{
		{name: "identical", edit: func(*httpRequest) {}, same: true},
		{name: "keys reordered", edit: func(r *httpRequest) { r.body = `{"qty":2,"sku":"A"}` }, same: true},
		{name: "white space", edit: func(r *httpRequest) { r.body = "{\n  \"sku\": \"A\",\n  \"qty\": 2\n}\n" }, same: true},
		{name: "base64 of the same body", edit: func(r *httpRequest) {
			r.body, r.base64 = base64.StdEncoding.EncodeToString([]byte(`{"qty":2,"sku":"A"}`)), true
		}, same: true},
		{name: "escaped the same", edit: func(r *httpRequest) { r.body = `{"sku":"\u0041","qty":2}` }, same: true},
		{name: "lower-case method", edit: func(r *httpRequest) { r.method = "post" }, same: true},
		{name: "other value", edit: func(r *httpRequest) { r.body = `{"sku":"A","qty":3}` }},
		{name: "number written otherwise", edit: func(r *httpRequest) { r.body = `{"sku":"A","qty":2.0}` }},
		{name: "other method", edit: func(r *httpRequest) { r.method = "PATCH" }},
		{name: "other path", edit: func(r *httpRequest) { r.path = "/orders/1" }},
		{name: "query reordered", edit: func(r *httpRequest) { r.rawQuery = "a=1&b=2" }, same: true},
		{name: "query as a map", edit: func(r *httpRequest) { r.rawQuery, r.query = "", map[string]string{"a": "1", "b": "2"} }, same: true},
		{name: "query as a multi-value map", edit: func(r *httpRequest) {
			r.rawQuery, r.multiQuery = "", map[string][]string{"a": {"1"}, "b": {"2"}}
		}, same: true},
		{name: "other query", edit: func(r *httpRequest) { r.rawQuery = "b=2&a=2" }},
		{name: "path into query", edit: func(r *httpRequest) { r.path, r.rawQuery = "/ordersa=1&b=2", "" }},
		{name: "empty body", edit: func(r *httpRequest) { r.body = "" }},
	}
	want, err := base.fingerprint()
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := base
			tc.edit(&r)
			got, err := r.fingerprint()
			require.NoError(t, err)
			if tc.same {
				assert.Equal(t, want, got)
			} else {
				assert.NotEqual(t, want, got)
			}
		})
	}
	_, err = (&httpRequest{body: "%%%", base64: true}).fingerprint()
	require.ErrorIs(t, err, errBadBase64)
}

func TestCanonicalQuery(t *testing.T) {
	t.Parallel()
	multi := httpRequest{multiQuery: map[string][]string{"a": {"1", "0"}, "b": {"2"}}}
	assert.Equal(t, canonicalRawQuery("b=2&a=1&a=0"), multi.canonicalQuery())
	assert.Equal(t, "", canonicalRawQuery(""))
	assert.Equal(t, "%zz", canonicalRawQuery("%zz"), "unparseable query kept as it is")
}

// fixtureBodies returns the request bodies of the fixtures, decoded from base64 if flagged.
func fixtureBodies(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, ev := range fixtureEvents(tb) {
		r := httpRequest{body: ev.Body, base64: ev.IsBase64Encoded}
		body, err := r.decodedBody()
		require.NoError(tb, err)
		out = append(out, string(body))
	}
	return out
}
