package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgserver"
)

// TestRun runs the Kafka measurement tiny, on a PostgreSQL it starts (or DATABASE_URL's):
// every pass makes every business write once. A missing server skips it, or fails it with
// IDEM_REQUIRE_POSTGRES set.
func TestRun(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if _, err := pgserver.Locate(); url == "" && err != nil {
		if os.Getenv("IDEM_REQUIRE_POSTGRES") != "" {
			t.Fatalf("%v (IDEM_REQUIRE_POSTGRES is set)", err)
		}
		t.Skipf("%v: set DATABASE_URL to a server, or install PostgreSQL", err)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	cfg := config{records: 200, partitions: 2, keys: 5, concurrency: 2, rounds: 2, batch: 50, batchClaims: true}
	require.NoError(t, run(context.Background(), "kafka", url, cfg, out))
	require.NoError(t, out.Close())
	lines := readResults(t, out.Name())
	require.Len(t, lines, 8) // 2 rounds × 2 designs × 2 passes
	for _, r := range lines {
		require.Equal(t, int64(r.BusinessWritesWanted), r.BusinessWrites, "%+v", r)
	}
}

func readResults(t *testing.T, path string) []result {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []result
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var r result
		require.NoError(t, dec.Decode(&r))
		out = append(out, r)
	}
	return out
}
