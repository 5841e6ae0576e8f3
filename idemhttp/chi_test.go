package idemhttp_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemhttp"
)

// TestChi: mounted in a chi router, on a route group whose URL parameters the tenant
// function reads (one account, one tenant) and the handler reads too; routes outside the
// group are not guarded.
func TestChi(t *testing.T) {
	t.Parallel()
	idempotent, err := idemhttp.Middleware(memGuard(t),
		idemhttp.WithTenant(func(r *http.Request) string { return chi.URLParam(r, "account") }))
	require.NoError(t, err)

	h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d: account %s, order %s", n, chi.URLParam(r, "account"), chi.URLParam(r, "order"))
	}}
	r := chi.NewRouter()
	r.Route("/accounts/{account}", func(r chi.Router) {
		r.Use(idempotent)
		r.Post("/orders/{order}", h.ServeHTTP)
	})
	r.Post("/ping", h.ServeHTTP)
	srv := serveHandler(t, r)

	tests := []struct {
		path, key, want string
		status          int
	}{
		{path: "/accounts/a/orders/1", key: "k-1", status: 201, want: "run 1: account a, order 1"},
		{path: "/accounts/a/orders/1", key: "k-1", status: 201, want: "run 1: account a, order 1"}, // replayed
		{path: "/accounts/b/orders/1", key: "k-1", status: 201, want: "run 2: account b, order 1"}, // another tenant
		{path: "/accounts/a/orders/2", key: "k-1", status: 422},                                    // another path
		{path: "/accounts/a/orders/2", status: 400},                                                // no key
		{path: "/ping", status: 201, want: "run 3: account , order "},                              // not guarded
	}
	for i, tc := range tests {
		got := send(t, http.MethodPost, srv.URL+tc.path, tc.key, `{"sku":"A"}`)
		assert.Equal(t, tc.status, got.status, "request %d: %s", i, got.body)
		if tc.want != "" {
			assert.Equal(t, tc.want, got.body, "request %d", i)
		}
	}
	assert.Equal(t, int64(3), h.runs.Load())
}
