package lambdawrap_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// checkpointFailStore is a working store whose checkpoints fail with err.
type checkpointFailStore struct {
	idemstore.Store
	err error
}

func (s checkpointFailStore) SetCheckpoint(context.Context, string, string, string, int64) error {
	return s.err
}

// TestHandlerReturnsGuardError: a handler whose idem.Checkpoint fails returns that error,
// and the wrapper answers it as it answers the same error met anywhere else: a lost lease
// as when the completion finds it lost (409, Retry-After), a store failure as when the
// claim fails (503, Retry-After). Nothing is stored, so a retry runs the handler again.
func TestHandlerReturnsGuardError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		// elsewhere builds a guard that meets the same error outside the handler, in a
		// scope of its own.
		elsewhere func(t *testing.T, store idemstore.Store) *idem.Guard
		status    int
	}{
		{name: "lease lost", err: idemstore.ErrLeaseLost, status: 409,
			elsewhere: func(t *testing.T, store idemstore.Store) *idem.Guard {
				return newGuard(t, newCompleteFailStore(store, idemstore.ErrLeaseLost, 1), idem.WithScope(testScope(t.Name()+"/elsewhere")))
			}},
		{name: "store failure", err: errUnavailable, status: 503,
			elsewhere: func(t *testing.T, _ idemstore.Store) *idem.Guard {
				return newGuard(t, failingStore{})
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
				ctx := invokeCtx(t)
				want := invoke(ctx, t, (&app{}).handler(t, ev.kind, tc.elsewhere(t, store)), ev)
				require.NoError(t, want.err)
				require.Equal(t, tc.status, want.code, "elsewhere: %s", want.raw)

				a := &app{checkpoint: true}
				h := a.handler(t, ev.kind, newGuard(t, checkpointFailStore{Store: store, err: tc.err}))
				for i := range 2 {
					got := invoke(ctx, t, h, ev)
					require.NoError(t, got.err, "answered, not an invocation error")
					assert.Equal(t, want.m, got.m, "request %d", i+1)
				}
				assert.Equal(t, int64(2), a.runs.Load(), "nothing stored: the retry ran again")
			})
		})
	}
}

// TestBadInput is the bad-input table of the package documentation, for every source: each
// request is sent twice, and the answers and handler runs are what the table prescribes.
func TestBadInput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", lambdawrap.MaxHeaderKeyLength)
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
		{name: "quoted key with parameters", edit: func(e *event) { e.setKey(`"order-7";v=1;trace=:aGk=:`) },
			status: 201, runs: 1, replayed: true},
		{name: "malformed parameters", edit: func(e *event) { e.setKey(`"order-7";V=1`) },
			status: 400, problem: lambdawrap.ProblemInvalidKey},
		{name: "text after quote", edit: func(e *event) { e.setKey(`"order-7"x`) },
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

// TestQuotedKeyIsTheKey: a quoted key, the same key with RFC 8941 parameters (which are
// ignored) and the same key bare are one key.
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
			for _, key := range []string{"order-9", `"order-9";v=1`, `"order-9"; a;b="x,y"`} {
				ev.setKey(key)
				r := invoke(ctx, t, h, ev)
				require.NoError(t, r.err)
				assert.Equal(t, "true", r.header(lambdawrap.ReplayedHeader), "key %s", key)
			}
			assert.Equal(t, int64(1), a.runs.Load())
		})
	}
}

// TestCompletionFailed: when the store fails to record the outcome after the handler ran,
// the client gets the handler's own response (its effects happened), never a claim that
// the store was down and nothing ran; the failure is logged at ERROR once, by the guard
// through its logger. The key stays in progress until its lease ends.
func TestCompletionFailed(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		var logs logRecords
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, newCompleteFailStore(store, errUnavailable, 1<<30), idem.WithLogger(logs.logger())))
		ctx := invokeCtx(t)

		first := invoke(ctx, t, h, ev)
		require.NoError(t, first.err)
		assert.Equal(t, 201, first.code, "the handler's response, body %s", first.body(t))
		assert.Empty(t, first.header(lambdawrap.ReplayedHeader))
		assert.Contains(t, first.body(t), "ord-0001")
		assert.Equal(t, []string{"ERROR"}, logs.levels(t))

		// The outcome was not recorded: until the lease ends, a retry is in progress.
		retry := invoke(ctx, t, h, ev)
		require.NoError(t, retry.err)
		assert.Equal(t, 409, retry.code)
		assert.Equal(t, lambdawrap.ProblemInProgress, retry.problem(t)["type"])
		assert.Equal(t, int64(1), a.runs.Load())
	})
}

// TestCompletionNotCommitted: when the store commits nothing (a cancelled transaction),
// the key is released, the client gets 503 with Retry-After saying so, and a retry runs
// the handler again.
func TestCompletionNotCommitted(t *testing.T) {
	t.Parallel()
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, newCompleteFailStore(store, notCommitted, 1)))
		ctx := invokeCtx(t)

		first := invoke(ctx, t, h, ev)
		require.NoError(t, first.err)
		assert.Equal(t, 503, first.code)
		assert.Equal(t, "1", first.header("Retry-After"))
		assert.Equal(t, "application/problem+json", first.header("Content-Type"))
		assert.Equal(t, lambdawrap.ProblemNotCommitted, first.problem(t)["type"])

		retry := invoke(ctx, t, h, ev)
		require.NoError(t, retry.err)
		assert.Equal(t, 201, retry.code)
		assert.Empty(t, retry.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, int64(2), a.runs.Load())
	})
}

// TestCompletionWithAttachedWritesUnknown: when a completion with attached writes fails and
// its outcome cannot be read back, the writes may or may not have committed, so the
// handler's response (an order id that may not exist) is not the truth: the client gets
// 503 ProblemOutcomeUnknown, and a retry after the lease either replays the committed
// response or runs again where nothing committed.
func TestCompletionWithAttachedWritesUnknown(t *testing.T) {
	t.Parallel()
	var logs logRecords
	var runs atomic.Int64
	handler := func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		n := runs.Add(1)
		if err := idem.Attach(ctx, func() error { return nil }); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"order":"ord-%d"}`, n)}, nil
	}
	store := unreadableStore{newCompleteFailStore(memstore.New(), errUnavailable, 1<<30)}
	h, err := lambdawrap.HTTPAPI(newGuard(t, store, idem.WithLogger(logs.logger())), handler)
	require.NoError(t, err)
	ev := loadEvent(t, "apigw-v2-post-with-key")

	first := invoke(invokeCtx(t), t, invoker{h: h}, ev)
	require.NoError(t, first.err)
	assert.Equal(t, 503, first.code, "body %s", first.body(t))
	assert.Equal(t, lambdawrap.ProblemOutcomeUnknown, first.problem(t)["type"])
	assert.NotEmpty(t, first.header("Retry-After"))
	assert.NotContains(t, first.body(t), "ord-1", "an order that may not exist is never announced")
	assert.Equal(t, []string{"ERROR", "INFO"}, logs.levels(t), "the guard's ERROR, and the request's INFO line")
	assert.Equal(t, int64(1), runs.Load())
}

// TestStoreUnavailable: 503 with Retry-After, and the handler does not run.
func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	for _, name := range baseFixtures() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, name)
			g, err := idem.New(failingStore{}, "test")
			require.NoError(t, err)
			a := &app{}
			r := invoke(invokeCtx(t), t, a.handler(t, ev.kind, g), ev)
			require.NoError(t, r.err)
			assert.Equal(t, 503, r.code)
			assert.Equal(t, "1", r.header("Retry-After"))
			assert.Equal(t, lambdawrap.ProblemStoreUnavailable, r.problem(t)["type"])
			assert.Equal(t, int64(0), a.runs.Load())
		})
	}
}
