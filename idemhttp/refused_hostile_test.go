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

// review8ReleaseHook is a memstore that runs once a function right after the first Release.
type review8ReleaseHook struct {
	idemstore.Store
	once         sync.Once
	afterRelease func()
}

func (s *review8ReleaseHook) Release(ctx context.Context, key, token string, now time.Time) error {
	err := s.Store.Release(ctx, key, token, now)
	s.once.Do(func() {
		if s.afterRelease != nil {
			s.afterRelease()
		}
	})
	return err
}

// TestReview8_RefusedAnswerWhileRetryCommits: request A's attached debit is refused for
// good (funds short) and WithRefused chooses 402. Between the guard's fencing release and
// its new claim, the client's retry B (same key; funds have since arrived) claims the
// released key, runs, debits and stores 201. A's new claim is refused by B's record, and A
// is still answered 402, a final-looking "payment required" that is not the key's result:
// the money was taken for this key, and every later retry replays 201. The first answer
// the client gets for the key differs from the one every retry gets.
func TestReview8_RefusedAnswerWhileRetryCommits(t *testing.T) {
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
	store := &review8ReleaseHook{Store: memstore.New()}
	srv := serve(t, newGuard(t, store), h, idemhttp.WithRefused(func(context.Context, error) (idemhttp.Problem, bool) {
		return idemhttp.Problem{Status: http.StatusPaymentRequired, Type: "https://example.com/problems/insufficient-funds"}, true
	}))
	var b response
	store.afterRelease = func() {
		mu.Lock()
		balance = 100 // the deposit lands
		mu.Unlock()
		b = send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`) // the client's retry
	}
	a := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	require.Equal(t, http.StatusCreated, b.status, "the retry between release and re-claim ran and committed")
	mu.Lock()
	assert.Equal(t, 0, balance, "debited once")
	mu.Unlock()
	c := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	assert.Equal(t, http.StatusCreated, c.status)
	assert.Equal(t, c.status, a.status, "A was answered %d (the chosen refusal) though the key's result is %d and the debit committed; body %s", a.status, c.status, a.body)
}

// TestReview8_StreamedThenRefusedRunsAgain: a handler streams 201 (Flush) and attaches a
// debit the store refuses for good. The package doc promises that for a streamed response
// "the handler never runs twice for the key, and a retry gets 500 ProblemNotReplayable";
// WithRefused's doc says only that such a response "is not answered again". In fact the
// refusal releases the key (WithRefused is not asked), the client already holds a 201 for
// a payment that did not happen, and the retry runs the handler a second time (and is
// streamed another 201, for a payment that again did not happen).
func TestReview8_StreamedThenRefusedRunsAgain(t *testing.T) {
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
	assert.Equal(t, http.StatusCreated, b.status, "each run streams a 201, none committed")
}

// review8LateStore holds the first completion with attached writes (its response lost, the
// request still on its way), applies it just before the first Release, and then fails the
// guard's next Get once.
type review8LateStore struct {
	idemstore.Store
	mu        sync.Mutex
	held      bool
	apply     func() error
	failGet   bool
	onRelease func()
}

func (s *review8LateStore) Complete(ctx context.Context, rec *idemstore.Record, attached []any) error {
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

func (s *review8LateStore) Release(ctx context.Context, key, token string, now time.Time) error {
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
	return s.Store.Release(ctx, key, token, now)
}

func (s *review8LateStore) Get(ctx context.Context, key string) (*idemstore.Record, error) {
	s.mu.Lock()
	fail := s.failGet
	s.failGet = false
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%w: throttled", idem.ErrStore)
	}
	return s.Store.Get(ctx, key)
}

// TestReview8_RefusedAnswerWhileLateAttemptCommitted: the completion's first attempt is on
// its way (response lost); the resend is refused for good (funds short). A deposit lands,
// then the first attempt: the debit and the 201 commit. The fencing release answers "lease
// lost", and the read that should find the key completed fails once (throttled). The guard
// takes that for "released", asks WithRefused, and the client is answered the chosen 402
// (payment required) - while its money was taken, and every retry replays 201.
func TestReview8_RefusedAnswerWhileLateAttemptCommitted(t *testing.T) {
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
	store := &review8LateStore{Store: memstore.New(), onRelease: func() {
		mu.Lock()
		balance = 100 // the deposit lands before the first attempt does
		mu.Unlock()
	}}
	srv := serve(t, newGuard(t, store), h, idemhttp.WithRefused(func(context.Context, error) (idemhttp.Problem, bool) {
		return idemhttp.Problem{Status: http.StatusPaymentRequired}, true
	}))
	a := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	mu.Lock()
	require.Equal(t, 0, balance, "the first attempt committed the debit")
	mu.Unlock()
	b := send(t, http.MethodPost, srv.URL, "pay-1", `{"amount":100}`)
	assert.Equal(t, http.StatusCreated, b.status, "the stored result")
	assert.Equal(t, int64(1), runs.Load())
	assert.Equal(t, b.status, a.status, "the client was answered %d though the debit committed; body %s", a.status, a.body)
}
