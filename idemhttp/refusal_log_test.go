package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/memstore"
)

// jsonLog collects a logger's records as JSON objects.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the records whose message is msg.
func (l *jsonLog) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	d := json.NewDecoder(bytes.NewReader(l.buf.Bytes()))
	for d.More() {
		var rec map[string]any
		require.NoError(t, d.Decode(&rec))
		if rec[slog.MessageKey] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestRefusalLogged: every refused request is logged at INFO, once, with its stored key
// and the reason, never the raw key.
func TestRefusalLogged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		reason    string
		status    int
		fail      func(s *storetest.Faulty)
		first     string // the body of a first request; none if empty
		body      string
		firstCode int
	}{
		{name: "key reused", reason: "payload_mismatch", status: 422, first: `{"a":1}`, body: `{"a":2}`, firstCode: 201},
		{name: "store down", reason: "store", status: 503, fail: func(s *storetest.Faulty) { s.Fail("claim", errors.New("store: connection refused"), false) }},
		{name: "lease lost", reason: "lease_lost", status: 409, fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) }},
		{name: "in flight", reason: "in_progress", status: 409, first: `{"a":1}`, body: `{"a":1}`, firstCode: 201,
			fail: func(s *storetest.Faulty) { s.Fail("complete", errors.New("store: timeout"), false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs jsonLog
			var mu sync.Mutex
			var storedKey string
			keep := func(_ context.Context, e idem.Event) {
				mu.Lock()
				defer mu.Unlock()
				storedKey = e.Key
			}
			store := storetest.NewFaulty(memstore.New())
			if tc.fail != nil {
				tc.fail(store)
			}
			g := newGuard(t, store, idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
				idem.WithHooks(idem.Hooks{OnClaimed: keep, OnStoreError: keep}))
			srv := serve(t, g, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
			if tc.first != "" {
				require.Equal(t, tc.firstCode, send(t, http.MethodPost, srv.URL, rawKey, tc.first).status)
			}
			require.Equal(t, tc.status, send(t, http.MethodPost, srv.URL, rawKey, tc.body).status)
			srv.Close()
			lines := logs.records(t, "idemhttp: request refused")
			require.Len(t, lines, 1, "one line per refused request")
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, "INFO", lines[0][slog.LevelKey])
			assert.Equal(t, storedKey, lines[0]["stored_key"])
			assert.Regexp(t, `^default\.orders#[0-9a-f]{64}$`, lines[0]["stored_key"])
			assert.Equal(t, tc.reason, lines[0]["reason"])
			assert.InDelta(t, float64(tc.status), lines[0]["status"], 0)
			assert.NotContains(t, logs.buf.String(), rawKey)
		})
	}
}
