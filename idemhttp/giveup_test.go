package idemhttp_test

// A handler that gives up (review 2, holes 1 and 2): the contract of the package doc's "A
// handler that gives up", pinned.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/memstore"
)

// TestReviewFinishedRunWithoutAnswerIsReleased (the reviewer's
// TestReviewFinishedRunIsNotReleasedAsAborted, adapted): the middleware cannot tell a
// handler that did its work and answered nothing from one that gave up, and the package
// doc makes the choice net/http's idiom makes: with its context ended, a handler that
// wrote nothing gave up. So a handler that did its work (the side effect, outside
// attached writes) and returned without a word after its context ended is released with
// 503 ProblemAborted, and the retry runs the side effect again: the documented contract is
// that a handler whose work is done answers with a status, and the control shows that one
// that does is stored and replayed. Effects that must not happen twice are attached to the
// completion (TestGiveUpWithAttachedWritesLeavesNoEffect).
func TestReviewFinishedRunWithoutAnswerIsReleased(t *testing.T) {
	t.Parallel()
	// finish does the work, then finishes (slow); it answers 201 if answer is set, else
	// nothing (net/http's implicit 200).
	finish := func(effects *atomic.Int64, slow func(r *http.Request), answer bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			effects.Add(1)
			slow(r)
			if answer {
				w.WriteHeader(http.StatusCreated)
			}
		})
	}
	// late finishes after the context ended: waiting for its end stands for a slow finish
	// that never looks at it, deterministically.
	late := func(r *http.Request) { <-r.Context().Done() }
	for _, answer := range []bool{false, true} {
		name := "no answer: released, run again"
		if answer {
			name = "answers 201 (control): stored, replayed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// check asserts the documented outcome of the retry: a replay of the first
			// answer, or a second run.
			check := func(t *testing.T, retry response, effects *atomic.Int64) {
				t.Helper()
				assert.Equal(t, http.StatusCreated, retry.status)
				if answer {
					assert.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
					assert.Equal(t, int64(1), effects.Load(), "a run that answered ran once")
					return
				}
				assert.Empty(t, retry.header.Get("Idempotent-Replayed"))
				assert.Equal(t, int64(2), effects.Load(), "released, so the retry ran the effect again")
			}

			t.Run("request deadline passes while the handler finishes", func(t *testing.T) {
				t.Parallel()
				var effects atomic.Int64
				mw, err := idemhttp.Middleware(memGuard(t))
				require.NoError(t, err)
				h := finish(&effects, late, answer)
				serveOne := func(ctx context.Context, n int64) response {
					rec := httptest.NewRecorder()
					req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/webhooks", nil)
					req.Header.Set("Idempotency-Key", "evt-1")
					if n > 1 { // the retry answers at once
						mw(finish(&effects, func(*http.Request) {}, true)).ServeHTTP(rec, req)
					} else {
						mw(h).ServeHTTP(rec, req)
					}
					res := rec.Result()
					return response{status: res.StatusCode, header: res.Header, body: rec.Body.String()}
				}
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond) // ample for an in-memory claim
				defer cancel()
				first := serveOne(ctx, 1)
				if answer {
					assert.Equal(t, http.StatusCreated, first.status)
				} else {
					checkProblem(t, first, http.StatusServiceUnavailable, idemhttp.ProblemAborted)
				}
				check(t, serveOne(t.Context(), 2), &effects)
			})

			t.Run("http.TimeoutHandler around the middleware", func(t *testing.T) {
				t.Parallel()
				var effects atomic.Int64
				settled := make(chan struct{}, 1)
				settle := func(context.Context, idem.Event) { settled <- struct{}{} }
				g := memGuard(t, idem.WithHooks(idem.Hooks{OnReleased: settle, OnCompleted: settle}))
				mw, err := idemhttp.Middleware(g)
				require.NoError(t, err)
				var runs atomic.Int64
				answered := make(chan struct{}) // the client has TimeoutHandler's answer
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if runs.Add(1) == 1 {
						// It finishes after TimeoutHandler answered (which also ended its
						// context).
						finish(&effects, func(*http.Request) { <-answered }, answer).ServeHTTP(w, r)
						return
					}
					finish(&effects, func(*http.Request) {}, true).ServeHTTP(w, r)
				})
				srv := serveHandler(t, http.TimeoutHandler(mw(h), 300*time.Millisecond, "timed out")) // ample for a claim
				first := send(t, http.MethodPost, srv.URL+"/webhooks", "evt-1", `{}`)
				assert.Equal(t, http.StatusServiceUnavailable, first.status, "TimeoutHandler's own answer")
				assert.Equal(t, "timed out", first.body)
				close(answered)
				<-settled // the run goes on after TimeoutHandler answered
				check(t, send(t, http.MethodPost, srv.URL+"/webhooks", "evt-1", `{}`), &effects)
			})

			t.Run("lease watchdog ends the context after the side effect", func(t *testing.T) {
				t.Parallel()
				var effects atomic.Int64
				var runs atomic.Int64
				// The handler commits its side effect, then waits on a downstream call bound
				// to its context that the lease watchdog ends.
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if runs.Add(1) == 1 {
						finish(&effects, func(r *http.Request) { <-r.Context().Done() }, answer).ServeHTTP(w, r)
						return
					}
					finish(&effects, func(*http.Request) {}, true).ServeHTTP(w, r)
				})
				g := memGuard(t, idem.WithLease(10*time.Millisecond), idem.WithLeaseMargin(10*time.Millisecond))
				srv := serve(t, g, h)
				first := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`)
				if answer {
					assert.Equal(t, http.StatusCreated, first.status)
				} else {
					checkProblem(t, first, http.StatusServiceUnavailable, idemhttp.ProblemAborted)
				}
				check(t, send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{}`), &effects)
			})
		})
	}
}

// TestGiveUpWithAttachedWritesLeavesNoEffect: the safe way for a handler's effects, as the
// package doc says: attached to the completion (idem.Attach here, on the in-memory store
// and on DynamoDB Local with dynamo.Attach), they commit only with it. A handler that
// attached its effect and then gave up (its context ended, it wrote nothing) is released
// with 503 ProblemAborted, and its effect never happened; the retry runs once and does it
// once, and the next retry replays.
func TestGiveUpWithAttachedWritesLeavesNoEffect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup returns the store, a function that attaches the effect, and one that
		// counts the effects committed.
		setup func(t *testing.T) (idemstore.Store, func(context.Context) error, func() int)
	}{
		{name: "memstore", setup: func(t *testing.T) (idemstore.Store, func(context.Context) error, func() int) {
			var effects atomic.Int64
			attach := func(ctx context.Context) error {
				return idem.Attach(ctx, func() error { effects.Add(1); return nil })
			}
			return memstore.New(), attach, func() int { return int(effects.Load()) }
		}},
		{name: "dynamodb", setup: func(t *testing.T) (idemstore.Store, func(context.Context) error, func() int) {
			ddblocal.SkipShort(t)
			client := dynamotest.Client(t)
			table := dynamotest.CreateTable(t, client, &dynamodb.CreateTableInput{
				TableName:            aws.String("webhooks"),
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
				BillingMode:          types.BillingModePayPerRequest,
			})
			key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "webhooks"}}
			attach := func(ctx context.Context) error {
				return dynamo.Attach(ctx, types.TransactWriteItem{Update: &types.Update{
					TableName:                 aws.String(table),
					Key:                       key,
					UpdateExpression:          aws.String("ADD deliveries :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
				}})
			}
			effects := func() int {
				out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
					TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
				require.NoError(t, err)
				n, ok := out.Item["deliveries"].(*types.AttributeValueMemberN)
				if !ok {
					return 0
				}
				v, err := strconv.Atoi(n.Value)
				require.NoError(t, err)
				return v
			}
			return dynamotest.NewStore(t), attach, effects
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, attach, effects := tc.setup(t)
			h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
				if err := attach(r.Context()); err != nil {
					w.WriteHeader(http.StatusInternalServerError) // not stored: released
					return
				}
				if n == 1 {
					<-r.Context().Done() // the lease ends before the downstream call answers
					return               // give up: no answer
				}
				w.WriteHeader(http.StatusCreated)
			}}
			g := newGuard(t, store, idem.WithLease(10*time.Millisecond), idem.WithLeaseMargin(10*time.Millisecond))
			srv := serve(t, g, h)

			first := send(t, http.MethodPost, srv.URL+"/webhooks", "evt-1", `{}`)
			checkProblem(t, first, http.StatusServiceUnavailable, idemhttp.ProblemAborted)
			assert.Equal(t, 0, effects(), "the run that gave up left no effect")

			retry := send(t, http.MethodPost, srv.URL+"/webhooks", "evt-1", `{}`)
			assert.Equal(t, http.StatusCreated, retry.status, "the retry runs, body %q", retry.body)
			assert.Equal(t, 1, effects(), "and does the effect once")

			again := send(t, http.MethodPost, srv.URL+"/webhooks", "evt-1", `{}`)
			assert.Equal(t, http.StatusCreated, again.status)
			assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			assert.Equal(t, 1, effects())
			assert.Equal(t, int64(2), h.runs.Load())
		})
	}
}

// TestReviewGiveUpUnderAnInnerDeadlineIsStored: a deadline set inside the middleware (a
// per-route timeout middleware mounted after this one, or the handler's own
// context.WithTimeout around a downstream call) ends the context the handler sees, not the
// middleware's, which cannot see it. So the package doc tells a handler that gives up under
// a deadline of its own to answer 503 or 504 itself: a 5xx is not stored, the key is
// released, and the retry runs the handler again. A handler that returns without writing
// there has answered net/http's empty 200, with the middleware's context alive, and that
// is stored and replayed: the documented limitation, pinned by the last case (the
// reviewer's test asserted it was not stored; the middleware has no way to know).
func TestReviewGiveUpUnderAnInnerDeadlineIsStored(t *testing.T) {
	t.Parallel()
	deadline := func(d time.Duration, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	for _, tc := range []struct {
		name   string
		answer int // what the first run answers when its deadline passes; 0: nothing
		runs   int64
	}{
		{name: "answers 504 (documented)", answer: http.StatusGatewayTimeout, runs: 2},
		{name: "answers 503 (documented)", answer: http.StatusServiceUnavailable, runs: 2},
		{name: "writes nothing: net/http's 200, stored (the limitation)", runs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					<-r.Context().Done() // the payment provider did not answer in time
					if tc.answer != 0 {
						w.WriteHeader(tc.answer)
					}
					return
				}
				w.WriteHeader(http.StatusCreated)
			}}
			mw, err := idemhttp.Middleware(memGuard(t))
			require.NoError(t, err)
			srv := serveHandler(t, mw(deadline(100*time.Millisecond, h)))
			first := send(t, http.MethodPost, srv.URL+"/payments", "k-1", `{}`)
			retry := send(t, http.MethodPost, srv.URL+"/payments", "k-1", `{}`)
			assert.Equal(t, tc.runs, h.runs.Load())
			if tc.answer != 0 {
				assert.Equal(t, tc.answer, first.status)
				assert.Equal(t, http.StatusCreated, retry.status, "the retry runs the handler again")
				assert.Empty(t, retry.header.Get("Idempotent-Replayed"))
				return
			}
			assert.Equal(t, http.StatusOK, first.status)
			assert.Equal(t, http.StatusOK, retry.status)
			assert.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
		})
	}
}
