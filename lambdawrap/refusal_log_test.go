package lambdawrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore/storetest"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// keySeen keeps the stored key the guard's hooks report, which the refusal's log line
// must name.
type keySeen struct {
	mu  sync.Mutex
	key string
}

func (k *keySeen) hooks() idem.Hooks {
	set := func(_ context.Context, e idem.Event) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if e.Key != "" {
			k.key = e.Key
		}
	}
	return idem.Hooks{OnClaimed: set, OnMismatch: set, OnInProgress: set, OnStoreError: set, OnLeaseLost: set}
}

func (k *keySeen) get() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.key
}

// refusalLines returns the records of buf, logged as JSON, whose message is msg.
func refusalLines(t *testing.T, buf *logRecords, msg string) []map[string]any {
	t.Helper()
	buf.mu.Lock()
	defer buf.mu.Unlock()
	var out []map[string]any
	d := json.NewDecoder(bytes.NewReader(buf.buf.Bytes()))
	for d.More() {
		var rec map[string]any
		require.NoError(t, d.Decode(&rec))
		if rec[slog.MessageKey] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// refusalCases are the refusals on-call is asked about, each with the reason its line
// names.
var refusalCases = []struct {
	name   string
	reason string
	fail   func(s *storetest.Faulty)
	status int
	// twice: a first call, then the one refused; with another body if otherBody
	twice, otherBody bool
}{
	{name: "key reused", reason: "payload_mismatch", twice: true, otherBody: true, status: 422},
	{name: "store down", reason: "store", status: 503, fail: func(s *storetest.Faulty) { s.Fail("claim", errors.New("store: connection refused"), false) }},
	{name: "lease lost", reason: "lease_lost", status: 409, fail: func(s *storetest.Faulty) { s.Fail("complete", idem.ErrLeaseLost, false) }},
	{name: "in flight", reason: "in_progress", status: 409, fail: func(s *storetest.Faulty) { s.Fail("complete", errors.New("store: timeout"), false) }, twice: true},
}

// TestRefusalLogged: every refused request of an HTTP decorator is logged at INFO, once,
// with its stored key and the reason, never the raw key.
func TestRefusalLogged(t *testing.T) {
	t.Parallel()
	for _, tc := range refusalCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logRecords
			var seen keySeen
			store := storetest.NewFaulty(memstore.New())
			if tc.fail != nil {
				tc.fail(store)
			}
			g := newGuard(t, store, idem.WithLogger(logs.logger()), idem.WithHooks(seen.hooks()))
			ev := loadEvent(t, "apigw-v2-post-with-key")
			ev.setKey(rawKey)
			h := (&app{}).handler(t, ev.kind, g)
			if tc.twice {
				_ = invoke(invokeCtx(t), t, h, ev)
				if tc.otherBody {
					ev.setBody(`{"other":true}`, false)
				}
			}
			r := invoke(invokeCtx(t), t, h, ev)
			require.Equal(t, tc.status, r.code)
			lines := refusalLines(t, &logs, "lambdawrap: request refused")
			require.Len(t, lines, 1, "one line per refused request")
			assert.Equal(t, "INFO", lines[0][slog.LevelKey])
			assert.Equal(t, seen.get(), lines[0]["stored_key"])
			assert.Equal(t, tc.reason, lines[0]["reason"])
			assert.InDelta(t, float64(tc.status), lines[0]["status"], 0)
			assert.NotContains(t, logs.buf.String(), rawKey)
		})
	}
}

// TestWrapRefusalLogged: every event Wrap refuses is logged at INFO, once, with its
// stored key and the reason, never the raw key.
func TestWrapRefusalLogged(t *testing.T) {
	t.Parallel()
	type order struct {
		Key  string `json:"key"`
		Body string `json:"body"`
	}
	for _, tc := range refusalCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logRecords
			var seen keySeen
			store := storetest.NewFaulty(memstore.New())
			if tc.fail != nil {
				tc.fail(store)
			}
			g := newGuard(t, store, idem.WithLogger(logs.logger()), idem.WithHooks(seen.hooks()))
			key, err := lambdawrap.KeyFromJMESPath[order]("key")
			require.NoError(t, err)
			wrapped, err := lambdawrap.Wrap(g, func(context.Context, order) (string, error) { return "done", nil }, key,
				lambdawrap.WithFingerprintJMESPath[order]("body"))
			require.NoError(t, err)
			body := "a"
			if tc.twice {
				_, _ = wrapped(invokeCtx(t), order{Key: rawKey, Body: body})
				if tc.otherBody {
					body = "b"
				}
			}
			_, err = wrapped(invokeCtx(t), order{Key: rawKey, Body: body})
			require.Error(t, err)
			lines := refusalLines(t, &logs, "lambdawrap: request refused")
			require.Len(t, lines, 1, "one line per refused event")
			assert.Equal(t, "INFO", lines[0][slog.LevelKey])
			assert.Equal(t, seen.get(), lines[0]["stored_key"])
			assert.Equal(t, tc.reason, lines[0]["reason"])
			assert.NotContains(t, logs.buf.String(), rawKey)
		})
	}
}
