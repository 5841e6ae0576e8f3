package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/proctest"
)

const pkg = "github.com/idemkit/idem/cmd/example-api"

// TestLocalModeProcess builds the binary, runs it outside Lambda against DynamoDB Local,
// drives it over HTTP through every scenario, and stops it with SIGINT.
func TestLocalModeProcess(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	idemTable, ordersTable := apiTables(t, client)
	bin := proctest.Build(t, pkg)
	port := proctest.FreePort(t)
	p := proctest.Start(t, bin, proctest.Env(endpoint,
		"IDEMPOTENCY_TABLE="+idemTable, "ORDERS_TABLE="+ordersTable, "PORT="+port))

	base := "http://127.0.0.1:" + port
	waitReady(t, p, base+"/orders/none")
	runScenarios(t, httpCaller(base), client, ordersTable)

	require.NoError(t, p.Signal(os.Interrupt))
	code, exited := p.Wait(30 * time.Second)
	require.True(t, exited, "example-api did not stop on SIGINT")
	assert.Equal(t, 0, code)
	assert.Contains(t, p.Output(), `"message":"example-api: listening"`)
	assert.NotContains(t, p.Output(), "checksum", "no SDK warning against DynamoDB Local")
}

// waitReady polls url until the server answers or the process exits.
func waitReady(t *testing.T, p *proctest.Process, url string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !p.Exited() {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("example-api did not answer at %s:\n%s", url, p.Output())
}

func TestMissingConfigurationProcess(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, pkg)
	tests := []struct {
		name    string
		env     []string
		missing string
	}{
		{name: "no tables", env: proctest.Env("http://127.0.0.1:1"), missing: "IDEMPOTENCY_TABLE, ORDERS_TABLE"},
		{name: "no orders table", env: proctest.Env("http://127.0.0.1:1", "IDEMPOTENCY_TABLE=i"), missing: "ORDERS_TABLE"},
		{name: "no region", env: withoutRegion(proctest.Env("http://127.0.0.1:1", "IDEMPOTENCY_TABLE=i", "ORDERS_TABLE=o")), missing: "AWS_REGION"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := proctest.Run(t, bin, tc.env, nil)
			assert.Equal(t, 1, code)
			assert.Equal(t, "example-api: missing environment variable(s): "+tc.missing+"\n", stderr)
		})
	}
}

func withoutRegion(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_REGION=") {
			out = append(out, kv)
		}
	}
	// No shared config file to find a region in either.
	return append(out, "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent")
}
