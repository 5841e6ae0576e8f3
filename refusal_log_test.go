package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRefusalLogSaysWhatHappened: the log line for refused attached writes never says the
// key is released when the result the handler chose with OnRefused is stored instead; it
// says which of the two happened.
func TestRefusalLogSaysWhatHappened(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		choose bool
		want   string
	}{
		{"chosen result stored", true, "refused writes answered with the result chosen for them; stored"},
		{"none chosen: released", false, "key released"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs lockedBuffer
			g, err := idem.New(&refusingStore{Store: &memstore.Store{}}, "pay",
				idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
			require.NoError(t, err)
			_, _, err = idem.Do(context.Background(), g, idem.Request{Key: "k"}, func(ctx context.Context) (string, error) {
				if err := idem.Attach(ctx, func() error { return &fundsError{account: "acct-1"} }); err != nil {
					return "", err
				}
				return "201", idem.OnRefused(ctx, func(context.Context, error) (any, bool) { return "402", tc.choose })
			})
			if tc.choose {
				require.NoError(t, err)
			} else {
				var fe *fundsError
				require.True(t, errors.As(err, &fe), "%v", err)
			}
			out := logs.String()
			assert.Contains(t, out, tc.want)
			if tc.choose {
				assert.NotContains(t, out, "releas", "the key was not released")
			}
			assert.NotContains(t, out, "acct-1", "never the error's text")
			assert.Equal(t, 1, strings.Count(out, "attached writes refused"), out)
		})
	}
}
