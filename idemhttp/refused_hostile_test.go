package idemhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// refusalHook is a memstore that runs a function once, before the first completion
// without attached writes: the guard's completion with the answer WithRefused chose.
type refusalHook struct {
	idemstore.Store
	once         sync.Once
	beforeChosen func()
}

func (s *refusalHook) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if len(attached) == 0 {
		s.once.Do(func() {
			if s.beforeChosen != nil {
				s.beforeChosen()
			}
		})
	}
	return s.Store.Complete(ctx, rec, attached)
}

// TestRefusedAnswerIsTheKeysResult: request A's attached debit is refused for good (funds
// short) and WithRefused chooses 402. While the guard records that answer, the deposit
// lands and the client's retry B (same key) arrives. The earlier design released the key
// and claimed it again, and B, run in between, debited and stored 201 while A was still
// answered 402. Now the key is never released: B meets it in progress (409), A's 402 is
// the key's result, and every later retry gets it; nothing is debited.
func TestRefusedAnswerIsTheKeysResult(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	balance := 0
	debit := func() error {
		mu.Lock()
		defer mu.Unlock()
		if balance < 100 {
			return errFunds
		}
		balance -= 100
		return nil
	}
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := idem.Attach(r.Context(), debit); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	store := &refusalHook{Store: memstore.New()}
	srv := serve(t, newGuard(t, store), h, idemhttp.WithRefused(func(context.Context, error) (idemhttp.Problem, bool) {
		return idemhttp.Problem{Status: http.StatusPaymentRequired, Type: "https://example.com/problems/insufficient-funds"}, true
	}))
	var b response
	store.beforeChosen = func() {
		mu.Lock()
		balance = 100 // the deposit lands
		mu.Unlock()
		b = send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`) // the client's retry
	}
	a := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	assert.Equal(t, http.StatusConflict, b.status, "the retry meets the key in progress; body %s", b.body)
	mu.Lock()
	assert.Equal(t, 100, balance, "nothing debited")
	mu.Unlock()
	c := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	assert.Equal(t, http.StatusPaymentRequired, c.status)
	assert.Equal(t, c.status, a.status, "A was answered %d though the key's result is %d; body %s", a.status, c.status, a.body)
	assert.Equal(t, int64(1), runs.Load())
}

// TestStreamedThenRefusedNeverRunsAgain: a handler streams 201 (Flush) and attaches a
// debit the store refuses for good. The package doc promises that for a streamed response
// "the handler never runs twice for the key, and a retry gets 500 ProblemNotReplayable".
// The refusal used to release the key (WithRefused is not asked: the client has its
// answer), and the retry ran the handler a second time. Now the key completes as streamed,
// without the writes, and the retry is answered not replayable. (The review's test
// asserted the retry was streamed 201 again, the hole itself; it now asserts the doc.)
func TestStreamedThenRefusedNeverRunsAgain(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := idem.Attach(r.Context(), func() error { return errFunds }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"p-1"}`))
		w.(http.Flusher).Flush()
	})
	srv := serve(t, memGuard(t), h, idemhttp.WithRefused(func(context.Context, error) (idemhttp.Problem, bool) {
		return idemhttp.Problem{Status: http.StatusPaymentRequired}, true
	}))
	a := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	b := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	assert.Equal(t, int64(1), runs.Load(), "the handler ran again for the key")
	assert.Equal(t, http.StatusCreated, a.status)
	checkProblem(t, b, http.StatusInternalServerError, idemhttp.ProblemNotReplayable)
}

// lateStore holds the first completion with attached writes (its response lost, the
// request still on its way), applies it just before the first Release or completion
// without attached writes (the one with WithRefused's answer), and then fails the guard's
// next Get once.
type lateStore struct {
	idemstore.Store
	mu        sync.Mutex
	held      bool
	apply     func() error
	failGet   bool
	onRelease func()
}

func (s *lateStore) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
	if len(attached) == 0 {
		if err := s.land(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if len(attached) > 0 && !s.held {
		s.held = true
		r := *rec
		s.apply = func() error { return s.Store.Complete(context.WithoutCancel(ctx), &r, attached) }
		s.mu.Unlock()
		return fmt.Errorf("%w: connection reset", idem.ErrStore)
	}
	s.mu.Unlock()
	return s.Store.Complete(ctx, rec, attached)
}

func (s *lateStore) Release(ctx context.Context, key, token string, now time.Time) error {
	if err := s.land(); err != nil {
		return err
	}
	return s.Store.Release(ctx, key, token, now)
}

// land applies the held attempt, if any, after onRelease ran, and fails the next Get.
func (s *lateStore) land() error {
	s.mu.Lock()
	apply := s.apply
	s.apply = nil
	s.mu.Unlock()
	if apply != nil {
		s.onRelease()
		if err := apply(); err != nil {
			return err
		}
		s.mu.Lock()
		s.failGet = true
		s.mu.Unlock()
	}
	return nil
}

func (s *lateStore) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	s.mu.Lock()
	fail := s.failGet
	s.failGet = false
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%w: throttled", idem.ErrStore)
	}
	return s.Store.Get(ctx, key)
}

// TestRefusedLateAttemptCommittedAnswersOutcomeUnknown: the completion's first attempt is
// on its way (response lost); the resend is refused for good (funds short). A deposit
// lands, then the first attempt: the debit and the 201 commit. The read that should find
// the key completed then fails once (throttled): after the fencing release answered "lease
// lost" without WithRefused, after the completion with WithRefused's 402 found the record
// completed with it. The guard used to take that for "released" and answer the refusal, or
// the chosen 402, while the money was taken and every retry replays 201. Whether the debit
// committed is not known: the client is answered 503 (outcome unknown), never the refusal.
// (The review asserted A gets 201; nothing tells the guard so, and the rule for an outcome
// not known to be "nothing committed" is the failed release's 503.)
func TestRefusedLateAttemptCommittedAnswersOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, chosen := range []bool{false, true} {
		var mu sync.Mutex
		balance := 0
		debit := func() error {
			mu.Lock()
			defer mu.Unlock()
			if balance < 100 {
				return errFunds
			}
			balance -= 100
			return nil
		}
		var runs atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			if err := idem.Attach(r.Context(), debit); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		store := &lateStore{Store: memstore.New(), onRelease: func() {
			mu.Lock()
			balance = 100 // the deposit lands before the first attempt does
			mu.Unlock()
		}}
		var opts []idemhttp.Option
		if chosen {
			opts = append(opts, idemhttp.WithRefused(func(context.Context, error) (idemhttp.Problem, bool) {
				return idemhttp.Problem{Status: http.StatusPaymentRequired}, true
			}))
		}
		srv := serve(t, newGuard(t, store), h, opts...)
		a := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
		mu.Lock()
		require.Equal(t, 0, balance, "chosen %v: the first attempt committed the debit", chosen)
		mu.Unlock()
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "chosen %v: the client was answered %d though the debit committed; body %s", chosen, a.status, a.body)
		b := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
		assert.Equal(t, http.StatusCreated, b.status, "chosen %v: the stored result", chosen)
		assert.Equal(t, int64(1), runs.Load(), "chosen %v", chosen)
	}
}
