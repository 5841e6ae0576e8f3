package soak_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/lab/soak"
)

// full runs the soak at its full size (`make soak`); without it the same code runs briefly.
var full = flag.Bool("soak", false, "run the soak at full size: 20,000 invocations")

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

func TestSoak(t *testing.T) {
	cfg := soak.Config{
		Invocations: 300, Keys: 30, Workers: 8, MaxDuration: time.Minute,
		FaultRate: 0.05, ErrorRate: 0.05,
		Deadline: 2 * time.Second, LeaseMargin: 200 * time.Millisecond, Seed: 7,
	}
	if *full {
		cfg.Invocations, cfg.Keys, cfg.Workers, cfg.MaxDuration = 20000, 300, 32, 5*time.Minute
	}
	client := ddblocal.Client(t)
	table := ddblocal.NewTable(t, client)

	report, err := soak.Run(t.Context(), client, table, cfg)
	require.NoError(t, err)
	t.Logf("soak: %s", report)
	for _, v := range report.Violations {
		t.Error(v)
	}
	if report.Invocations < cfg.Invocations {
		// The bound held: what ran is checked all the same.
		t.Logf("soak: stopped at its time bound after %d of %d invocations", report.Invocations, cfg.Invocations)
	}
	assert.Zero(t, report.StuckKeys)
	assert.Equal(t, report.KeysTouched, report.CompletedKeys)
	assert.Positive(t, report.FaultsInjected)
	assert.Positive(t, report.Replays)
	assert.Positive(t, report.InProgress, "in-flight duplicates occurred")
	assert.LessOrEqual(t, report.Executions, report.Claims, "runs per lease at most one")
}
