package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/proctest"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// curlKey finds the idempotency key of the printed curl pair.
var curlKey = regexp.MustCompile(`(?m)^  curl -si -X POST (\S+)/orders .*-H 'Idempotency-Key: (demo-[0-9a-f]{16})'`)

// TestDevserver runs `make run`'s program as a process, the way make does, follows the
// banner's curl pair with an HTTP client, and stops it with SIGINT.
func TestDevserver(t *testing.T) {
	t.Parallel()
	api := proctest.Build(t, "github.com/idemkit/idem/cmd/example-api")
	dev := proctest.Build(t, "github.com/idemkit/idem/lab/cmd/devserver")
	shared := ddblocal.Endpoint(t)
	tests := []struct {
		name     string
		endpoint string // DYNAMODB_ENDPOINT; empty: devserver starts DynamoDB Local itself
		runs     int
	}{
		{name: "own DynamoDB Local", runs: 1},
		{name: "given endpoint, tables kept between runs", endpoint: shared, runs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range tc.runs {
				runDevserver(t, dev, api, tc.endpoint)
			}
		})
	}
}

func runDevserver(t *testing.T, dev, api, endpoint string) {
	t.Helper()
	port := proctest.FreePort(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PORT=" + port}
	if endpoint != "" {
		env = append(env, ddblocal.EnvEndpoint+"="+endpoint)
	}
	p := proctest.Start(t, dev, env, "-api", api)

	var m []string
	deadline := time.Now().Add(90 * time.Second)
	for m == nil && time.Now().Before(deadline) && !p.Exited() {
		time.Sleep(100 * time.Millisecond)
		m = curlKey.FindStringSubmatch(p.Output())
	}
	require.NotNil(t, m, "no curl pair printed:\n%s", p.Output())
	assert.Equal(t, "http://localhost:"+port, m[1])
	url := "http://127.0.0.1:" + port + "/orders"
	body := `{"sku":"WIDGET-42","quantity":2,"amount_cents":1250}`

	var bodies []string
	for i := range 2 {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", m[2])
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, i == 1, resp.Header.Get("Idempotent-Replayed") == "true")
		bodies = append(bodies, string(data))
	}
	assert.Equal(t, bodies[0], bodies[1])

	require.NoError(t, p.Signal(os.Interrupt))
	code, exited := p.Wait(60 * time.Second)
	require.True(t, exited, "devserver did not stop on SIGINT")
	assert.Equal(t, 0, code, p.Output())
	// It stops only what it started: a DynamoDB named by DYNAMODB_ENDPOINT keeps running.
	if endpoint == "" {
		assert.Contains(t, p.Output(), "\nCtrl-C stops example-api and DynamoDB Local.\n")
		assert.Contains(t, p.Output(), "\nStopping example-api and DynamoDB Local ...\n")
	} else {
		assert.Contains(t, p.Output(), "\nCtrl-C stops example-api (DynamoDB at "+endpoint+" keeps running).\n")
		assert.Contains(t, p.Output(), "\nStopping example-api (DynamoDB at "+endpoint+" keeps running) ...\n")
		assert.NotContains(t, p.Output(), "Stopping example-api and DynamoDB Local")
	}
	_, err := http.Get(url + "/none")
	assert.Error(t, err, "example-api still answers after devserver stopped")
}

// TestAPIExitingBeforeReady: an example-api that exits before it answers makes devserver
// report it and exit, rather than wait for an exit it has already seen.
func TestAPIExitingBeforeReady(t *testing.T) {
	t.Parallel()
	dev := proctest.Build(t, "github.com/idemkit/idem/lab/cmd/devserver")
	api := t.TempDir() + "/example-api"
	require.NoError(t, os.WriteFile(api, []byte("#!/bin/sh\necho 'listen: address in use' >&2\nexit 3\n"), 0o755))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"PORT=" + proctest.FreePort(t), ddblocal.EnvEndpoint + "=" + ddblocal.Endpoint(t)}
	p := proctest.Start(t, dev, env, "-api", api)
	code, exited := p.Wait(60 * time.Second)
	require.True(t, exited, "devserver still runs after example-api exited:\n%s", p.Output())
	assert.Equal(t, 1, code, p.Output())
	assert.Contains(t, p.Output(), "example-api exited before answering: exit status 3")
}
