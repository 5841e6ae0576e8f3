package idemhttp_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// TestOptions: Middleware refuses a nil guard and an invalid option with an error wrapping
// idem.ErrInvalidOption that names it; a nil option is skipped.
func TestOptions(t *testing.T) {
	t.Parallel()
	g := memGuard(t)
	tests := []struct {
		name string
		g    *idem.Guard
		opts []idemhttp.Option
		want string
	}{
		{name: "nil guard", want: "idem: invalid option: idemhttp: Middleware: guard must not be nil"},
		{name: "no methods", g: g, opts: []idemhttp.Option{idemhttp.WithMethods()}, want: "idem: invalid option: idemhttp: WithMethods: must name at least one method"},
		{name: "bad method", g: g, opts: []idemhttp.Option{idemhttp.WithMethods("PO ST")}, want: `idem: invalid option: idemhttp: WithMethods: "PO ST" is not a method name`},
		{name: "bad header", g: g, opts: []idemhttp.Option{idemhttp.WithHeader("Idempotency Key")}, want: `idem: invalid option: idemhttp: WithHeader: "Idempotency Key" is not a header name`},
		{name: "nil cacheable", g: g, opts: []idemhttp.Option{idemhttp.WithCacheable(nil)}, want: "idem: invalid option: idemhttp: WithCacheable: must not be nil"},
		{name: "nil tenant", g: g, opts: []idemhttp.Option{idemhttp.WithTenant(nil)}, want: "idem: invalid option: idemhttp: WithTenant: must not be nil"},
		{name: "request body", g: g, opts: []idemhttp.Option{idemhttp.WithMaxRequestBody(0)}, want: "idem: invalid option: idemhttp: WithMaxRequestBody: must be positive"},
		{name: "response body", g: g, opts: []idemhttp.Option{idemhttp.WithMaxResponseBody(-1)}, want: "idem: invalid option: idemhttp: WithMaxResponseBody: must be positive"},
		{name: "the first invalid option", g: g, opts: []idemhttp.Option{idemhttp.WithMethods("POST"), idemhttp.WithHeader(""), idemhttp.WithCacheable(nil)},
			want: `idem: invalid option: idemhttp: WithHeader: "" is not a header name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mw, err := idemhttp.Middleware(tc.g, tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.EqualError(t, err, tc.want)
			assert.Nil(t, mw)
		})
	}
	mw, err := idemhttp.Middleware(g, nil, idemhttp.WithMethods("post", "DELETE"))
	require.NoError(t, err)
	h := created()
	srv := serveHandler(t, mw(h))
	for range 2 {
		assert.Equal(t, http.StatusCreated, send(t, http.MethodDelete, srv.URL, "k-1", "").status)
	}
	assert.Equal(t, int64(1), h.runs.Load(), "DELETE guarded, method names in any case")
}
