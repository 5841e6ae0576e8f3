package lambdawrap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/internal/capture"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// rawKey is a caller's key distinctive enough to be found in any output it reaches.
const rawKey = "RAWKEY-7f3a9c2e-never-logged"

// TestRawKeyNeverLogged drives every failure path of the HTTP decorators (each event
// fixture's shape) and of Wrap with a distinctive raw key, with the guard logging
// everything at DEBUG and every hook reporting, and finds the key in none of it, nor in
// the errors returned to Lambda (which the runtime may log): a raw key may be personal
// data, and only its hash (the stored key) ever leaves the process. Each case checks the
// answer of its path, so that the path was taken.
func TestRawKeyNeverLogged(t *testing.T) {
	t.Parallel()
	errDown := errors.New("store: connection refused")
	notCommitted := fmt.Errorf("store: transaction cancelled: %w", idemstore.ErrNotCommitted)
	type env struct {
		a   *app
		ev  *event
		out *capture.Output
	}
	tests := []struct {
		name   string
		guard  []idem.Option
		fail   func(s *storetest.Faulty)
		app    func(a *app)
		run    func(t *testing.T, e env, h func(t *testing.T) response)
		logged string // in the output when the path was taken and reported
	}{
		{name: "key too long", run: func(t *testing.T, e env, h func(t *testing.T) response) {
			e.ev.setKey(rawKey + strings.Repeat("x", 256))
			checkProblem(t, h(t), 400, lambdawrap.ProblemInvalidKey)
		}},
		{name: "malformed parameters", run: func(t *testing.T, e env, h func(t *testing.T) response) {
			e.ev.setKey(`"` + rawKey + `";V=1`)
			checkProblem(t, h(t), 400, lambdawrap.ProblemInvalidKey)
		}},
		{name: "key reused", logged: "OnMismatch", run: func(t *testing.T, e env, h func(t *testing.T) response) {
			assert.Equal(t, 201, h(t).code)
			e.ev.setBody(`{"other":true}`, false)
			checkProblem(t, h(t), 422, lambdawrap.ProblemKeyReused)
		}},
		{name: "store down before the run", logged: "idempotency store failed",
			fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) },
			run: func(t *testing.T, _ env, h func(t *testing.T) response) {
				checkProblem(t, h(t), 503, lambdawrap.ProblemStoreUnavailable)
			}},
		{name: "store down, fail-open", logged: "fail-open", guard: []idem.Option{idem.WithFailOpen(true)},
			fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) },
			run:  func(t *testing.T, _ env, h func(t *testing.T) response) { assert.Equal(t, 201, h(t).code) }},
		{name: "completion fails", logged: "completion failed",
			fail: func(s *storetest.Faulty) { s.Fail("complete", errDown, false) },
			run: func(t *testing.T, _ env, h func(t *testing.T) response) {
				assert.Equal(t, 201, h(t).code)
				checkProblem(t, h(t), 409, lambdawrap.ProblemInProgress)
			}},
		{name: "completion not committed", logged: "completion not committed",
			fail: func(s *storetest.Faulty) { s.Fail("complete", notCommitted, false) },
			run: func(t *testing.T, _ env, h func(t *testing.T) response) {
				checkProblem(t, h(t), 503, lambdawrap.ProblemNotCommitted)
			}},
		{name: "completion finds the lease lost", logged: "lease lost",
			fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) },
			run: func(t *testing.T, _ env, h func(t *testing.T) response) {
				checkProblem(t, h(t), 409, lambdawrap.ProblemLeaseLost)
			}},
		{name: "handler error", logged: "OnReleased", app: func(a *app) { a.fail.Store(true) },
			run: func(t *testing.T, _ env, h func(t *testing.T) response) { require.ErrorIs(t, h(t).err, errHandler) }},
		{name: "handler answers 500, release fails", logged: "release failed", app: func(a *app) { a.status.Store(500) },
			fail: func(s *storetest.Faulty) { s.Fail("release", errDown, false) },
			run:  func(t *testing.T, _ env, h func(t *testing.T) response) { assert.Equal(t, 500, h(t).code) }},
		{name: "checkpoint fails", logged: "idempotency store failed", app: func(a *app) { a.checkpoint = true },
			fail: func(s *storetest.Faulty) { s.Fail("checkpoint", errDown, false) },
			run: func(t *testing.T, _ env, h func(t *testing.T) response) {
				checkProblem(t, h(t), 503, lambdawrap.ProblemStoreUnavailable)
			}},
		{name: "response too large to store, then not replayable", logged: "cannot be replayed",
			guard: []idem.Option{idem.WithMaxResultSize(16)},
			run: func(t *testing.T, _ env, h func(t *testing.T) response) {
				assert.Equal(t, 201, h(t).code)
				checkProblem(t, h(t), 500, lambdawrap.ProblemNotReplayable)
			}},
		{name: "in progress", logged: "OnInProgress",
			app: func(a *app) { a.started, a.release, a.hold = make(chan struct{}, 1), make(chan struct{}), 1 },
			run: func(t *testing.T, e env, h func(t *testing.T) response) {
				first := make(chan response, 1)
				go func() { first <- h(t) }()
				<-e.a.started
				checkProblem(t, h(t), 409, lambdawrap.ProblemInProgress)
				close(e.a.release)
				assert.Equal(t, 201, (<-first).code)
			}},
	}
	for _, name := range baseFixtures() {
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				var out capture.Output
				store := storetest.NewFaulty(memstore.New())
				if tc.fail != nil {
					tc.fail(store)
				}
				a := &app{}
				if tc.app != nil {
					tc.app(a)
				}
				ev := loadEvent(t, name)
				ev.setKey(rawKey)
				h := a.handler(t, ev.kind, newGuard(t, store, append(out.Options(), tc.guard...)...))
				invokeOnce := func(t *testing.T) response {
					r := invoke(invokeCtx(t), t, h, ev)
					out.Error(r.err)
					return r
				}
				tc.run(t, env{a: a, ev: ev, out: &out}, invokeOnce)
				assert.Contains(t, out.String(), tc.logged, "the path reported")
				assert.NotContains(t, out.String(), rawKey)
			})
		}
	}

	t.Run("handler gives up when the lease runs out", func(t *testing.T) {
		t.Parallel()
		var out capture.Output
		ev := loadEvent(t, "apigw-v2-post-with-key")
		ev.setKey(rawKey)
		g := newGuard(t, memstore.New(), append(out.Options(), idem.WithMaxLease(10*time.Millisecond),
			idem.WithLeaseMargin(10*time.Millisecond))...)
		var runs atomic.Int64
		h := giveUpHandler(t, ev.kind, g, &runs, func() {})
		checkProblem(t, invoke(invokeCtx(t), t, h, ev), 503, lambdawrap.ProblemAborted)
		assert.Contains(t, out.String(), "gave up")
		assert.NotContains(t, out.String(), rawKey)
	})
	t.Run("Wrap", func(t *testing.T) {
		t.Parallel()
		type order struct {
			Key  string `json:"key"`
			Body string `json:"body"`
		}
		errFingerprint := errors.New("app: cannot fingerprint")
		for _, tc := range []struct {
			name   string
			guard  []idem.Option
			fail   func(s *storetest.Faulty)
			h      func(ctx context.Context, o order) (string, error)
			key    string // the key's JMESPath expression; "key" when empty
			opt    bool   // the key is optional (OptionalKey)
			opts   []lambdawrap.Option[order]
			run    func(t *testing.T, do func(o order) error)
			logged string
		}{
			// go-jmespath's errors print the argument a function refused: the raw key here,
			// and the whole body when the body is the argument.
			{name: "key expression meets the wrong type", key: "abs(key)", run: func(t *testing.T, do func(o order) error) {
				require.ErrorIs(t, do(order{Key: rawKey}), idem.ErrMissingKey)
			}},
			{name: "optional key expression meets the wrong type", key: "abs(key)", opt: true, logged: "OnUnguarded",
				run: func(t *testing.T, do func(o order) error) { require.NoError(t, do(order{Key: rawKey})) }},
			{name: "key expression's powertools_base64 meets no base64", key: "powertools_base64(key)",
				run: func(t *testing.T, do func(o order) error) {
					require.ErrorIs(t, do(order{Key: rawKey}), idem.ErrMissingKey)
				}},
			{name: "optional key expression's powertools_json meets no JSON", key: "powertools_json(key).id", opt: true, logged: "OnUnguarded",
				run: func(t *testing.T, do func(o order) error) { require.NoError(t, do(order{Key: rawKey})) }},
			{name: "fingerprint expression meets the wrong type",
				opts: []lambdawrap.Option[order]{lambdawrap.WithFingerprintJMESPath[order]("abs(body)")},
				run: func(t *testing.T, do func(o order) error) {
					require.Error(t, do(order{Key: "k-1", Body: `{"order_id":"` + rawKey + `"}`}))
				}},
			{name: "fingerprint expression's powertools_json meets no JSON",
				opts: []lambdawrap.Option[order]{lambdawrap.WithFingerprintJMESPath[order]("powertools_json(body)")},
				run: func(t *testing.T, do func(o order) error) {
					require.Error(t, do(order{Key: "k-1", Body: "{" + rawKey}))
				}},
			{name: "key too long", run: func(t *testing.T, do func(o order) error) {
				require.ErrorIs(t, do(order{Key: rawKey + strings.Repeat("x", idem.MaxKeyLength)}), idem.ErrInvalidKey)
			}},
			{name: "key reused", logged: "OnMismatch", opts: []lambdawrap.Option[order]{lambdawrap.WithFingerprintJMESPath[order]("body")},
				run: func(t *testing.T, do func(o order) error) {
					require.NoError(t, do(order{Key: rawKey, Body: "a"}))
					require.ErrorIs(t, do(order{Key: rawKey, Body: "b"}), idem.ErrPayloadMismatch)
				}},
			{name: "fingerprint fails", opts: []lambdawrap.Option[order]{lambdawrap.WithFingerprint(func(order) ([]byte, error) { return nil, errFingerprint })},
				run: func(t *testing.T, do func(o order) error) {
					require.ErrorIs(t, do(order{Key: rawKey}), errFingerprint)
				}},
			{name: "store down before the run", logged: "OnStoreError", fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) },
				run: func(t *testing.T, do func(o order) error) { require.ErrorIs(t, do(order{Key: rawKey}), idem.ErrStore) }},
			{name: "store down, fail-open", logged: "fail-open", guard: []idem.Option{idem.WithFailOpen(true)},
				fail: func(s *storetest.Faulty) { s.Fail("claim", errDown, false) },
				run:  func(t *testing.T, do func(o order) error) { require.NoError(t, do(order{Key: rawKey})) }},
			{name: "completion fails", logged: "completion failed", fail: func(s *storetest.Faulty) { s.Fail("complete", errDown, false) },
				run: func(t *testing.T, do func(o order) error) {
					require.NoError(t, do(order{Key: rawKey}))
					require.ErrorIs(t, do(order{Key: rawKey}), idem.ErrInProgress)
				}},
			{name: "completion not committed", logged: "completion not committed", fail: func(s *storetest.Faulty) { s.Fail("complete", notCommitted, false) },
				run: func(t *testing.T, do func(o order) error) {
					require.ErrorIs(t, do(order{Key: rawKey}), idemstore.ErrNotCommitted)
				}},
			{name: "completion finds the lease lost", logged: "lease lost", fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) },
				run: func(t *testing.T, do func(o order) error) {
					require.ErrorIs(t, do(order{Key: rawKey}), idem.ErrLeaseLost)
				}},
			{name: "handler error, release fails", logged: "release failed", fail: func(s *storetest.Faulty) { s.Fail("release", errDown, false) },
				h:   func(context.Context, order) (string, error) { return "", errHandler },
				run: func(t *testing.T, do func(o order) error) { require.ErrorIs(t, do(order{Key: rawKey}), errHandler) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var out capture.Output
				store := storetest.NewFaulty(memstore.New())
				if tc.fail != nil {
					tc.fail(store)
				}
				h := tc.h
				if h == nil {
					h = func(_ context.Context, o order) (string, error) { return "done", nil }
				}
				expr := tc.key
				if expr == "" {
					expr = "key"
				}
				key, err := lambdawrap.KeyFromJMESPath[order](expr)
				require.NoError(t, err)
				if tc.opt {
					key = lambdawrap.OptionalKey(key)
				}
				wrapped, err := lambdawrap.Wrap(newGuard(t, store, append(out.Options(), tc.guard...)...), h, key, tc.opts...)
				require.NoError(t, err)
				tc.run(t, func(o order) error {
					_, err := wrapped(invokeCtx(t), o)
					out.Error(err)
					return err
				})
				assert.Contains(t, out.String(), tc.logged, "the path reported")
				assert.NotContains(t, out.String(), rawKey)
			})
		}
	})
}
