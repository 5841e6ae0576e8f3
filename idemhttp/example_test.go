package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// createOrder is the handler of the examples: every run creates a new order.
func createOrder() http.HandlerFunc {
	orders := 0
	return func(w http.ResponseWriter, r *http.Request) {
		orders++ // the middleware runs it once per key, so a plain counter shows the runs
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", orders))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, orders)
	}
}

// post sends a POST with key (none if empty) and prints the answer.
func post(url, key, body string) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	replayed := ""
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		replayed = " (replayed)"
	}
	fmt.Printf("%d%s %s\n", resp.StatusCode, replayed, b)
}

func Example() {
	guard, err := idem.New(memstore.New(), "create-order")
	if err != nil {
		panic(err)
	}
	idempotent, err := idemhttp.Middleware(guard)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(idempotent(createOrder()))
	defer srv.Close()

	post(srv.URL+"/orders", "8e0b7c1e", `{"sku":"A1","qty":2}`)
	post(srv.URL+"/orders", "8e0b7c1e", `{"qty":2,"sku":"A1"}`) // a retry: the same request
	post(srv.URL+"/orders", "8e0b7c1e", `{"sku":"A1","qty":3}`) // the key reused for another
	post(srv.URL+"/orders", "", `{"sku":"A1","qty":2}`)
	// Output:
	// 201 {"order":1}
	// 201 (replayed) {"order":1}
	// 422 {"type":"https://pkg.go.dev/github.com/idemkit/idem/idemhttp#ProblemKeyReused","title":"Unprocessable Entity","status":422,"detail":"this idempotency key was used for a request with a different method, path, query or body"}
	// 400 {"type":"https://pkg.go.dev/github.com/idemkit/idem/idemhttp#ProblemMissingKey","title":"Bad Request","status":400,"detail":"this request requires an idempotency key in the Idempotency-Key header"}
}

// The middleware in a chi router, on the routes that create things.
func ExampleMiddleware() {
	guard, err := idem.New(memstore.New(), "orders-api")
	if err != nil {
		panic(err)
	}
	idempotent, err := idemhttp.Middleware(guard)
	if err != nil {
		panic(err)
	}
	r := chi.NewRouter()
	r.With(idempotent).Post("/orders", createOrder())
	r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "order %s", chi.URLParam(r, "id"))
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	post(srv.URL+"/orders", "k-1", "")
	post(srv.URL+"/orders", "k-1", "")
	resp, err := http.Get(srv.URL + "/orders/1")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(b))
	// Output:
	// 201 {"order":1}
	// 201 (replayed) {"order":1}
	// 200 order 1
}

// userKey is the context key under which the examples' authentication keeps the user.
type userKey struct{}

// The tenant is the user that authentication put in the request's context: the same key
// from two users is two requests.
func ExampleWithTenant() {
	guard, _ := idem.New(memstore.New(), "create-order")
	idempotent, err := idemhttp.Middleware(guard, idemhttp.WithTenant(func(r *http.Request) string {
		user, _ := r.Context().Value(userKey{}).(string)
		return user
	}))
	if err != nil {
		panic(err)
	}
	// A stand-in for real authentication, which would verify a token.
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user := r.URL.Query().Get("user")
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		})
	}
	srv := httptest.NewServer(authenticate(idempotent(createOrder())))
	defer srv.Close()

	post(srv.URL+"/orders?user=alice", "k-1", "")
	post(srv.URL+"/orders?user=bob", "k-1", "")
	post(srv.URL+"/orders?user=alice", "k-1", "")
	// Output:
	// 201 {"order":1}
	// 201 {"order":2}
	// 201 (replayed) {"order":1}
}

// A request without a key runs unguarded, and the guard's logger and OnUnguarded hook
// report it.
func ExampleWithKeyRequired() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	guard, _ := idem.New(memstore.New(), "create-order", idem.WithLogger(logger))
	idempotent, _ := idemhttp.Middleware(guard, idemhttp.WithKeyRequired(false))
	srv := httptest.NewServer(idempotent(createOrder()))
	defer srv.Close()

	post(srv.URL+"/orders", "", "")
	post(srv.URL+"/orders", "", "")
	// Output:
	// level=WARN msg="idemhttp: no idempotency key; running the handler unguarded" error="idem: missing idempotency key: the request has no idempotency key header"
	// 201 {"order":1}
	// level=WARN msg="idemhttp: no idempotency key; running the handler unguarded" error="idem: missing idempotency key: the request has no idempotency key header"
	// 201 {"order":2}
}

// PUT is guarded too; PATCH no longer is.
func ExampleWithMethods() {
	guard, _ := idem.New(memstore.New(), "orders")
	idempotent, _ := idemhttp.Middleware(guard, idemhttp.WithMethods(http.MethodPost, http.MethodPut))
	srv := httptest.NewServer(idempotent(createOrder()))
	defer srv.Close()

	for _, method := range []string{http.MethodPut, http.MethodPut, http.MethodPatch, http.MethodPatch} {
		req, _ := http.NewRequest(method, srv.URL, nil)
		req.Header.Set("Idempotency-Key", "k-"+method)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(method, resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b))
	}
	// Output:
	// PUT 201  {"order":1}
	// PUT 201 true {"order":1}
	// PATCH 201  {"order":2}
	// PATCH 201  {"order":3}
}

// Only 2xx responses are stored: a 4xx releases the key as a 5xx does.
func ExampleWithCacheable() {
	guard, _ := idem.New(memstore.New(), "create-order")
	idempotent, _ := idemhttp.Middleware(guard, idemhttp.WithCacheable(func(status int) bool { return status < 300 }))
	runs := 0
	srv := httptest.NewServer(idempotent(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		http.Error(w, fmt.Sprintf("out of stock (run %d)", runs), http.StatusGone)
	})))
	defer srv.Close()

	post(srv.URL, "k-1", "")
	post(srv.URL, "k-1", "")
	// Output:
	// 410 out of stock (run 1)
	//
	// 410 out of stock (run 2)
}

// The key comes in another header.
func ExampleWithHeader() {
	guard, _ := idem.New(memstore.New(), "create-order")
	idempotent, _ := idemhttp.Middleware(guard, idemhttp.WithHeader("X-Request-Key"))
	srv := httptest.NewServer(idempotent(createOrder()))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("X-Request-Key", "k-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b))
	}
	// Output:
	// 201  {"order":1}
	// 201 true {"order":1}
}

// A body larger than the limit is refused before the key is claimed.
func ExampleWithMaxRequestBody() {
	guard, _ := idem.New(memstore.New(), "create-order")
	idempotent, _ := idemhttp.Middleware(guard, idemhttp.WithMaxRequestBody(16))
	srv := httptest.NewServer(idempotent(createOrder()))
	defer srv.Close()

	post(srv.URL, "k-1", `{"sku":"A1"}`)
	post(srv.URL, "k-2", `{"sku":"A1","note":"gift wrap, please"}`)
	// Output:
	// 201 {"order":1}
	// 413 {"type":"https://pkg.go.dev/github.com/idemkit/idem/idemhttp#ProblemRequestTooLarge","title":"Request Entity Too Large","status":413,"detail":"the request body is larger than 16 bytes, the most read to fingerprint a request"}
}

// A response larger than the limit is sent as it is written, and recorded without it: the
// handler does not run again, and a retry learns that the response cannot be replayed.
func ExampleWithMaxResponseBody() {
	guard, _ := idem.New(memstore.New(), "export", idem.WithLogger(slog.New(slog.DiscardHandler)))
	idempotent, _ := idemhttp.Middleware(guard, idemhttp.WithMaxResponseBody(1024))
	runs := 0
	srv := httptest.NewServer(idempotent(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		for range 100 {
			_, _ = io.WriteString(w, "0123456789abcdef0123456789abcdef\n")
		}
	})))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		var problem struct{ Type string }
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = json.Unmarshal(b, &problem)
		fmt.Println(resp.StatusCode, len(b), "bytes", problem.Type, "runs:", runs)
	}
	// Output:
	// 200 3300 bytes  runs: 1
	// 500 224 bytes https://pkg.go.dev/github.com/idemkit/idem/idemhttp#ProblemNotReplayable runs: 1
}
