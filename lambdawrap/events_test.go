package lambdawrap_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
)

// invokeCtx is the context of one invocation, with a deadline as Lambda gives one.
func invokeCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestFixtures drives every fixture through lambda.NewHandler(h).Invoke: the first call
// runs the handler, the retry replays the response byte for byte plus the replay header;
// or, for a fixture in unidentifiedFixtures, both are refused with 500
// ProblemUnknownCaller. The pair is kept in <fixture>.golden.json for review.
func TestFixtures(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store idemstore.Store) {
		for _, name := range fixtures(t) {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ev := loadEvent(t, name)
				a := &app{}
				h := a.handler(t, ev.kind, newGuard(t, store))
				ctx := invokeCtx(t)

				first := invoke(ctx, t, h, ev)
				require.NoError(t, first.err)
				replay := invoke(ctx, t, h, ev)
				require.NoError(t, replay.err)

				if unidentifiedFixtures[name] {
					assert.Equal(t, int64(0), a.runs.Load(), "handler runs")
					for _, r := range []response{first, replay} {
						assert.Equal(t, 500, r.code)
						assert.Equal(t, lambdawrap.ProblemUnknownCaller, r.problem(t)["type"])
					}
					checkGolden(t, name, ev.defaultTenant(t), first, replay)
					return
				}
				assert.Equal(t, int64(1), a.runs.Load(), "handler runs")
				assert.Equal(t, 201, first.code)
				assert.Empty(t, first.header(lambdawrap.ReplayedHeader))
				assert.Equal(t, "true", replay.header(lambdawrap.ReplayedHeader))
				assert.Equal(t, first.m, replay.withoutReplayHeader(), "replay differs from the first response")
				assert.Equal(t, first.m["isBase64Encoded"], replay.m["isBase64Encoded"])
				checkGolden(t, name, ev.defaultTenant(t), first, replay)
			})
		}
	})
}

// unidentifiedFixtures are the fixtures of authenticated requests whose caller identity
// the decorators do not read, which they refuse (see TestUnidentifiedCallerIsRefused).
var unidentifiedFixtures = map[string]bool{
	"apigw-v2-lambda-authorizer-simple-response": true,
	"apigw-v2-jwt-authorizer-without-sub":        true,
}

func checkGolden(t *testing.T, name, tenant string, first, replay response) {
	t.Helper()
	got, err := json.MarshalIndent(map[string]any{
		"tenant": tenant,
		"first":  json.RawMessage(first.raw),
		"replay": json.RawMessage(replay.raw),
	}, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create the golden file")
	assert.JSONEq(t, string(want), string(got))
}

// baseFixtures are one fixture per source (and per ALB header mode) for the behaviour tests.
func baseFixtures() []string {
	return []string{
		"apigw-rest-post-with-key",
		"apigw-v2-post-with-key",
		"function-url-post-with-key",
		"alb-post-with-key",
		"alb-multi-value-headers",
	}
}

// forEachSource runs test for every store and base fixture, in parallel.
func forEachSource(t *testing.T, test func(t *testing.T, store idemstore.Store, ev *event)) {
	forEachStore(t, func(t *testing.T, store idemstore.Store) {
		for _, name := range baseFixtures() {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				test(t, store, loadEvent(t, name))
			})
		}
	})
}

// TestConcurrentDuplicates: while the first request runs, every duplicate gets 409 with
// Retry-After and the handler runs once; after it completes, a retry replays.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{started: make(chan struct{}, 1), release: make(chan struct{})}
		h := a.handler(t, ev.kind, newGuard(t, store))
		ctx := invokeCtx(t)

		firstDone := make(chan response, 1)
		go func() { firstDone <- invoke(ctx, t, h, ev) }()
		<-a.started

		const duplicates = 6
		var wg sync.WaitGroup
		dups := make([]response, duplicates)
		for i := range dups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dups[i] = invoke(ctx, t, h, ev)
			}()
		}
		wg.Wait()
		close(a.release)
		first := <-firstDone

		require.NoError(t, first.err)
		assert.Equal(t, 201, first.code)
		for _, d := range dups {
			require.NoError(t, d.err)
			assert.Equal(t, 409, d.code)
			assert.Equal(t, "application/problem+json", d.header("Content-Type"))
			assert.Equal(t, lambdawrap.ProblemInProgress, d.problem(t)["type"])
			retry, err := strconv.Atoi(d.header("Retry-After"))
			require.NoError(t, err, "Retry-After %q", d.header("Retry-After"))
			// The lease ends at the 10 s deadline plus the 2 s margin.
			assert.True(t, retry >= 1 && retry <= 12, "Retry-After %d", retry)
		}
		assert.Equal(t, int64(1), a.runs.Load())

		again := invoke(ctx, t, h, ev)
		assert.Equal(t, "true", again.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, first.m, again.withoutReplayHeader())
	})
}

// TestConcurrentRace fires duplicates all at once: exactly one runs, and every other one
// gets either 409 or the replay.
func TestConcurrentRace(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, store))
		ctx := invokeCtx(t)
		const n = 12
		out := make([]response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out[i] = invoke(ctx, t, h, ev)
			}()
		}
		close(start)
		wg.Wait()
		assert.Equal(t, int64(1), a.runs.Load())
		fresh := 0
		for _, r := range out {
			require.NoError(t, r.err)
			switch {
			case r.code == 409:
				assert.NotEmpty(t, r.header("Retry-After"))
			case r.header(lambdawrap.ReplayedHeader) == "true":
				assert.Equal(t, 201, r.code)
			default:
				assert.Equal(t, 201, r.code)
				fresh++
			}
		}
		assert.Equal(t, 1, fresh, "responses that ran the handler")
	})
}

// TestKeyReusedWithAnotherBody: 422, and the handler does not run again.
func TestKeyReusedWithAnotherBody(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, store))
		ctx := invokeCtx(t)
		require.Equal(t, 201, invoke(ctx, t, h, ev).code)

		ev.setBody(`{"sku":"SOMETHING-ELSE","quantity":99}`, false)
		r := invoke(ctx, t, h, ev)
		require.NoError(t, r.err)
		assert.Equal(t, 422, r.code)
		assert.Equal(t, "application/problem+json", r.header("Content-Type"))
		p := r.problem(t)
		assert.Equal(t, lambdawrap.ProblemKeyReused, p["type"])
		assert.Equal(t, float64(422), p["status"])
		assert.Equal(t, "Unprocessable Entity", p["title"])
		assert.NotEmpty(t, p["detail"])
		assert.Equal(t, int64(1), a.runs.Load())
	})
}

// TestKeyReusedWithCaseFoldKeys: Go's decoder matches struct fields in any case and the
// last matching key wins, so {"amount":1,"AMOUNT":100} means 100 and the same keys the
// other way round mean 1. The second body reuses the key for another request: 422.
func TestKeyReusedWithCaseFoldKeys(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, store))
		ctx := invokeCtx(t)
		ev.setBody(`{"sku":"WIDGET-42","amount":1,"AMOUNT":100}`, false)
		require.Equal(t, 201, invoke(ctx, t, h, ev).code)

		ev.setBody(`{"sku":"WIDGET-42","AMOUNT":100,"amount":1}`, false)
		r := invoke(ctx, t, h, ev)
		require.NoError(t, r.err)
		assert.Equal(t, 422, r.code)
		assert.Empty(t, r.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, lambdawrap.ProblemKeyReused, r.problem(t)["type"])

		// Keys that are not equal in any case still count in any order.
		ev.setBody(`{"amount":1,"AMOUNT":100,"sku":"WIDGET-42"}`, false)
		r = invoke(ctx, t, h, ev)
		require.NoError(t, r.err)
		assert.Equal(t, "true", r.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, int64(1), a.runs.Load())
	})
}

// TestNotStored: a 5xx response, a 409, a 429 and a handler error are not stored, so the
// retry runs the handler again.
func TestNotStored(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		a := &app{}
		h := a.handler(t, ev.kind, newGuard(t, store))
		ctx := invokeCtx(t)
		for i, status := range []int{500, 503, 409, 429} {
			a.status.Store(int64(status))
			r := invoke(ctx, t, h, ev)
			require.NoError(t, r.err)
			assert.Equal(t, status, r.code)
			assert.Empty(t, r.header(lambdawrap.ReplayedHeader))
			assert.Equal(t, int64(i+1), a.runs.Load(), "status %d", status)
		}
		a.status.Store(0)
		a.fail.Store(true)
		r := invoke(ctx, t, h, ev)
		require.ErrorContains(t, r.err, errHandler.Error()) // the runtime flattens the error
		assert.Equal(t, int64(5), a.runs.Load())

		a.fail.Store(false)
		ok := invoke(ctx, t, h, ev)
		assert.Equal(t, 201, ok.code)
		assert.Empty(t, ok.header(lambdawrap.ReplayedHeader))
		replay := invoke(ctx, t, h, ev)
		assert.Equal(t, "true", replay.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, int64(6), a.runs.Load())
	})
}

// TestLambdaDeadline: the lease ends at the invocation's deadline plus the guard's margin,
// so the key of an invocation that timed out (and never released it) is claimable right
// after, and the timed-out invocation, should it finish late, cannot overwrite the result.
func TestLambdaDeadline(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		clock := newClock()
		g := newGuard(t, store, idem.WithClock(clock), idem.WithLeaseMargin(2*time.Second))
		a := &app{started: make(chan struct{}, 2), release: make(chan struct{}), hold: 1}
		h := a.handler(t, ev.kind, g)

		// The first invocation has 3 s left; it hangs as a timed-out function would.
		ctx1 := withDeadline(invokeCtx(t), clock.Now().Add(3*time.Second))
		timedOut := make(chan response, 1)
		go func() { timedOut <- invoke(ctx1, t, h, ev) }()
		<-a.started

		clock.Advance(time.Second)
		busy := invoke(invokeCtx(t), t, h, ev)
		assert.Equal(t, 409, busy.code)
		assert.Equal(t, "4", busy.header("Retry-After"), "lease ends at deadline + margin")

		// Past the deadline and the margin the key can be claimed again.
		clock.Advance(4*time.Second + time.Millisecond)
		retry := invoke(invokeCtx(t), t, h, ev)
		require.NoError(t, retry.err)
		assert.Equal(t, 201, retry.code)
		assert.Empty(t, retry.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, int64(2), a.runs.Load())

		// The stale invocation finishes: its completion is fenced off.
		close(a.release)
		late := <-timedOut
		require.NoError(t, late.err)
		assert.Equal(t, 409, late.code)
		assert.Equal(t, lambdawrap.ProblemLeaseLost, late.problem(t)["type"])

		again := invoke(invokeCtx(t), t, h, ev)
		assert.Equal(t, "true", again.header(lambdawrap.ReplayedHeader))
		assert.Equal(t, retry.body(t), again.body(t))
		assert.Equal(t, int64(2), a.runs.Load())
	})
}

// FuzzEvents feeds arbitrary payloads, seeded with the fixtures in testdata, to each of the
// four decorators as the Lambda runtime would, twice. Whatever the event, nothing panics,
// the answer is one the semantics table allows (or the refusal of an authenticated event
// without a caller identity), and a replay is the first response.
func FuzzEvents(f *testing.F) {
	for _, name := range fixtures(f) {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"httpMethod":"POST","headers":{"Idempotency-Key":"k"},"isBase64Encoded":true,"body":"!"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, k := range []kind{kindREST, kindHTTPAPI, kindFunctionURL, kindALB} {
			a := &app{}
			h := a.handler(t, k, memGuard(t))
			ctx := context.Background()
			out1, err1 := h.Invoke(ctx, payload)
			out2, err2 := h.Invoke(ctx, payload)
			if err1 != nil || err2 != nil {
				// Only a payload the runtime cannot decode fails the invocation.
				assert.Equal(t, int64(0), a.runs.Load())
				continue
			}
			r1 := decodeResponse(t, out1)
			r2 := decodeResponse(t, out2)
			if r1.code == 500 {
				// An authenticated event without a caller identity: refused.
				assert.Equal(t, lambdawrap.ProblemUnknownCaller, r1.problem(t)["type"], "first answer %s", out1)
				assert.Equal(t, int64(0), a.runs.Load())
				continue
			}
			assert.Contains(t, []int{201, 400}, r1.code, "first answer %s", out1)
			assert.LessOrEqual(t, a.runs.Load(), int64(2))
			if r2.header(lambdawrap.ReplayedHeader) == "true" {
				assert.Equal(t, int64(1), a.runs.Load())
				assert.Equal(t, r1.m, r2.withoutReplayHeader())
			}
		}
	})
}
