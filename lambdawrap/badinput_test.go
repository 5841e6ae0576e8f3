package lambdawrap_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
)

// TestBadInput is the bad-input table of the package documentation, for every source: each
// request is sent twice, and the answers and handler runs are what the table prescribes.
func TestBadInput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", lambdawrap.MaxKeyLength)
	tests := []struct {
		name     string
		edit     func(e *event)
		opts     []lambdawrap.HTTPOption
		status   int    // of both requests
		problem  string // type of both answers, for errors
		runs     int64  // handler runs after both
		replayed bool   // the second is a replay
		// lastWins marks a duplicated header: a load balancer without multi-value headers
		// passes on only the last value, so it sees one valid key.
		lastWins bool
	}{
		{name: "no header", edit: func(e *event) { e.setKey() },
			status: 400, problem: lambdawrap.ProblemMissingKey},
		{name: "no header, key optional", edit: func(e *event) { e.setKey() }, opts: []lambdawrap.HTTPOption{lambdawrap.WithKeyRequired(false)},
			status: 201, runs: 2},
		{name: "empty key", edit: func(e *event) { e.setKey("") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "empty key, key optional", edit: func(e *event) { e.setKey("") }, opts: []lambdawrap.HTTPOption{lambdawrap.WithKeyRequired(false)},
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "blank key", edit: func(e *event) { e.setKey("   ") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "255-character key", edit: func(e *event) { e.setKey(long) },
			status: 201, runs: 1, replayed: true},
		{name: "256-character key", edit: func(e *event) { e.setKey(long + "k") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "256-character quoted key", edit: func(e *event) { e.setKey(`"` + long + `k"`) },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "control character", edit: func(e *event) { e.setKey("order\x01-1") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "tab inside", edit: func(e *event) { e.setKey("order\t1") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "DEL character", edit: func(e *event) { e.setKey("order\x7f1") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "non-ASCII", edit: func(e *event) { e.setKey("clé-42") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "quoted key", edit: func(e *event) { e.setKey(`"order-7"`) },
			status: 201, runs: 1, replayed: true},
		{name: "quoted key with escapes", edit: func(e *event) { e.setKey(`"say \"hi\" \\ bye"`) },
			status: 201, runs: 1, replayed: true},
		{name: "quoted key with comma", edit: func(e *event) { e.setKey(`"a,b"`) },
			status: 201, runs: 1, replayed: true},
		{name: "unterminated quote", edit: func(e *event) { e.setKey(`"order-7`) },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "text after quote", edit: func(e *event) { e.setKey(`"order-7";v=1`) },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "stray quote", edit: func(e *event) { e.setKey(`order"7`) },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "duplicate header values", edit: func(e *event) { e.setKey("order-1", "order-2") },
			status: 400, problem: lambdawrap.ProblemInvalidKey, lastWins: true},
		{name: "duplicate header values, same key", edit: func(e *event) { e.setKey("order-1", "order-1") },
			status: 201, runs: 1, replayed: true},
		{name: "duplicate, bare and quoted", edit: func(e *event) { e.setKey("order-1", `"order-1"`) },
			status: 201, runs: 1, replayed: true},
		{name: "comma-joined values", edit: func(e *event) { e.setKey("order-1, order-2") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "trailing comma", edit: func(e *event) { e.setKey("order-1,") },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "two spellings, two values", edit: func(e *event) {
			e.setHeader("Idempotency-Key", "order-1")
			addHeader(e, "IDEMPOTENCY-KEY", "order-2")
		}, status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "lowercase header name", edit: func(e *event) { e.setHeader("idempotency-key", "order-3") },
			status: 201, runs: 1, replayed: true},
		{name: "uppercase header name", edit: func(e *event) { e.setHeader("IDEMPOTENCY-KEY", "order-3") },
			status: 201, runs: 1, replayed: true},
		{name: "GET with key passes through", edit: func(e *event) { e.setMethod(http.MethodGet) },
			status: 201, runs: 2},
		{name: "GET with invalid key passes through", edit: func(e *event) { e.setMethod(http.MethodGet); e.setKey("") },
			status: 201, runs: 2},
		{name: "PUT passes through", edit: func(e *event) { e.setMethod(http.MethodPut) },
			status: 201, runs: 2},
		{name: "PATCH is guarded", edit: func(e *event) { e.setMethod(http.MethodPatch) },
			status: 201, runs: 1, replayed: true},
		{name: "PUT guarded by WithMethods", edit: func(e *event) { e.setMethod(http.MethodPut) },
			opts:   []lambdawrap.HTTPOption{lambdawrap.WithMethods("put")},
			status: 201, runs: 1, replayed: true},
		{name: "invalid base64 body", edit: func(e *event) { e.setBody("not*base64!", true) },
			status: 400, problem: lambdawrap.ProblemInvalidRequest},
		{name: "empty body", edit: func(e *event) { e.setBody("", false) },
			status: 201, runs: 1, replayed: true},
		{name: "empty base64 body", edit: func(e *event) { e.setBody("", true) },
			status: 201, runs: 1, replayed: true},
		{name: "custom header", edit: func(e *event) { e.setKey(); e.setHeader("X-Request-Token", "tok-1") },
			opts:   []lambdawrap.HTTPOption{lambdawrap.WithHeader("x-request-token")},
			status: 201, runs: 1, replayed: true},
	}
	forEachStore(t, func(t *testing.T, store idemstore.Store) {
		for _, name := range baseFixtures() {
			for _, tc := range tests {
				t.Run(name+"/"+tc.name, func(t *testing.T) {
					t.Parallel()
					ev := loadEvent(t, name)
					tc.edit(ev)
					status, problem, runs, replayed := tc.status, tc.problem, tc.runs, tc.replayed
					if tc.lastWins && ev.kind == kindALB && !ev.multiValueMode() {
						status, problem, runs, replayed = 201, "", 1, true
					}
					a := &app{}
					h := a.handler(t, ev.kind, newGuard(t, store), tc.opts...)
					ctx := invokeCtx(t)
					for i := range 2 {
						r := invoke(ctx, t, h, ev)
						require.NoError(t, r.err)
						assert.Equal(t, status, r.code, "request %d: %s", i+1, r.raw)
						if problem != "" {
							checkProblem(t, r, status, problem)
						}
						wantReplay := ""
						if i == 1 && replayed {
							wantReplay = "true"
						}
						assert.Equal(t, wantReplay, r.header(lambdawrap.ReplayedHeader), "request %d", i+1)
					}
					assert.Equal(t, runs, a.runs.Load(), "handler runs")
				})
			}
		}
	})
}

// checkProblem asserts an RFC 9457 answer.
func checkProblem(t *testing.T, r response, status int, typ string) {
	t.Helper()
	assert.Equal(t, "application/problem+json", r.header("Content-Type"))
	p := r.problem(t)
	assert.Equal(t, typ, p["type"])
	assert.Equal(t, http.StatusText(status), p["title"])
	assert.Equal(t, float64(status), p["status"])
	assert.NotEmpty(t, p["detail"])
	if r.m["multiValueHeaders"] != nil {
		assert.Nil(t, r.m["headers"], "a load balancer in multi-value mode reads only multiValueHeaders")
	}
}

// addHeader adds a header under another spelling, keeping the ones there.
func addHeader(e *event, name, value string) {
	if e.multiValueMode() || e.kind == kindREST {
		e.obj("multiValueHeaders")[name] = []string{value}
	}
	if !e.multiValueMode() {
		e.obj("headers")[name] = value
	}
}

// TestQuotedKeyIsTheKey: a quoted key and the same key bare are one key.
func TestQuotedKeyIsTheKey(t *testing.T) {
	t.Parallel()
	for _, name := range baseFixtures() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, name)
			a := &app{}
			h := a.handler(t, ev.kind, memGuard(t))
			ctx := invokeCtx(t)
			ev.setKey(`"order-9"`)
			require.Equal(t, 201, invoke(ctx, t, h, ev).code)
			ev.setKey("order-9")
			r := invoke(ctx, t, h, ev)
			assert.Equal(t, "true", r.header(lambdawrap.ReplayedHeader))
			assert.Equal(t, int64(1), a.runs.Load())
		})
	}
}
