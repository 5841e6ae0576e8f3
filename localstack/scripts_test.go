package localstack

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// script returns the absolute path of a script in this directory.
func script(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(name)
	require.NoError(t, err)
	return p
}

// TestSmoke runs smoke.sh against fake stacks: on the community image (no HTTP API, whose
// id reads "unknown", and LocalStack's 404 for it) it must invoke the function; with the
// HTTP API it must go through it.
func TestSmoke(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		apiID   string
		httpAPI bool
		mode    string
	}{
		{name: "community image", apiID: "unknown", mode: "invoke"},
		{name: "no API id", apiID: "None", mode: "invoke"},
		{name: "API id that LocalStack does not serve", apiID: "a1b2c3", mode: "invoke"},
		{name: "Pro image with the HTTP API", apiID: "a1b2c3", httpAPI: true, mode: "http"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(tc.apiID, tc.httpAPI)
			out, code := runScript(t, s.serve(t), 2*time.Minute, script(t, "smoke.sh"))
			require.Equal(t, 0, code, out)
			assert.Contains(t, out, "   via "+tc.mode+"; Idempotency-Key: smoke-order-")
			assert.Contains(t, out, "smoke: OK")
			orders, sends, calls := s.counts()
			assert.Equal(t, 1, orders)
			assert.Equal(t, 3, sends)
			invoked := strings.Count(strings.Join(calls, "\n"), "lambda invoke")
			if tc.mode == "http" {
				assert.Zero(t, invoked)
				assert.Contains(t, out, "ok  GET /orders/{id}")
			} else {
				assert.Equal(t, 2, invoked)
			}
		})
	}
}

// TestSmokeSendFails makes the first sqs send-message fail: smoke.sh must stop there,
// naming it, and not wait for a credit that was never sent.
func TestSmokeSendFails(t *testing.T) {
	t.Parallel()
	s := newStack("unknown", false)
	s.sendErr = "Could not connect to the endpoint URL"
	env := append(s.serve(t), "API_MODE=invoke")
	out, code := runScript(t, env, time.Minute, script(t, "smoke.sh"))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "Could not connect to the endpoint URL")
	assert.Contains(t, out, "smoke: FAIL: sqs send-message to http://sqs/ledger failed (see the error above)")
	assert.NotContains(t, out, "sent message")
	assert.NotContains(t, out, "no credit for")
}

// TestAPIMode feeds the HTTP API probe canned answers.
func TestAPIMode(t *testing.T) {
	t.Parallel()
	const appNotFound = `{"detail":"no such order","status":404,"title":"Not Found","type":"about:blank"}`
	tests := []struct {
		name        string
		id          string
		status      int
		contentType string
		body        string
		down        bool // nothing listens
		want        string
	}{
		{name: "unknown id", id: "unknown", status: 404, contentType: "application/problem+json", body: appNotFound, want: "invoke"},
		{name: "None", id: "None", status: 404, contentType: "application/problem+json", body: appNotFound, want: "invoke"},
		{name: "empty", id: "", status: 404, contentType: "application/problem+json", body: appNotFound, want: "invoke"},
		{name: "the application's 404", id: "x1", status: 404, contentType: "application/problem+json", body: appNotFound, want: "http"},
		{name: "LocalStack's 404", id: "x1", status: 404, contentType: "application/json", body: `{"message":"Not Found"}`, want: "invoke"},
		{name: "another problem", id: "x1", status: 404, contentType: "application/problem+json", body: `{"detail":"no such route"}`, want: "invoke"},
		{name: "200", id: "x1", status: 200, contentType: "application/json", body: `{}`, want: "invoke"},
		{name: "nothing listens", id: "x1", down: true, want: "invoke"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var hosts []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hosts = append(hosts, r.Host+" "+r.URL.Path)
				mu.Unlock()
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			endpoint := srv.URL
			if tc.down {
				srv.Close()
			} else {
				t.Cleanup(srv.Close)
			}
			env := scriptEnv(t, nil, "LOCALSTACK_ENDPOINT="+endpoint)
			out, code := runScript(t, env, time.Minute, "-c",
				`set -euo pipefail; source "$1"; source "$2"; api_mode "$3"`, "bash",
				script(t, "env.sh"), script(t, "probes.sh"), tc.id)
			require.Equal(t, 0, code, out)
			assert.Equal(t, tc.want+"\n", out)
			port := endpoint[strings.LastIndex(endpoint, ":")+1:]
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.id == "" || tc.id == "None" || tc.id == "unknown":
				assert.Empty(t, hosts, "no API to probe")
			case !tc.down:
				assert.Equal(t, []string{tc.id + ".execute-api.localhost.localstack.cloud:" + port + " /orders/none"}, hosts)
			}
		})
	}
}

// dockerStub prints the image and bucket compose would get, and its arguments.
const dockerStub = `#!/usr/bin/env bash
echo "image=${LOCALSTACK_IMAGE} bucket=${SAM_ARTIFACTS_BUCKET} args=$*"
`

// TestComposeImage runs compose.sh with a stub docker: the Pro image with an auth token
// (API Gateway v2 is only there), the community image without, or the one asked for.
func TestComposeImage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		extra []string
		want  string
	}{
		{name: "no token", want: "image=localstack/localstack:4.4 bucket=idem-sam-artifacts"},
		{name: "token", extra: []string{"LOCALSTACK_AUTH_TOKEN=ls-token"}, want: "image=localstack/localstack-pro:4.4 bucket=idem-sam-artifacts"},
		{name: "image given", extra: []string{"LOCALSTACK_AUTH_TOKEN=ls-token", "LOCALSTACK_IMAGE=mirror/localstack-pro:4.4.1"},
			want: "image=mirror/localstack-pro:4.4.1 bucket=idem-sam-artifacts"},
		{name: "bucket given", extra: []string{"SAM_ARTIFACTS_BUCKET=my-bucket"}, want: "image=localstack/localstack:4.4 bucket=my-bucket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := scriptEnv(t, map[string]string{"docker": dockerStub}, tc.extra...)
			out, code := runScript(t, env, time.Minute, script(t, "compose.sh"), "up", "-d", "--wait")
			require.Equal(t, 0, code, out)
			assert.Equal(t, tc.want+" args=compose -f localstack/compose.yaml up -d --wait\n", out)
		})
	}
}

// TestInitHookBucket runs the init hook with a stub awslocal: it creates the bucket named
// by SAM_ARTIFACTS_BUCKET.
func TestInitHookBucket(t *testing.T) {
	t.Parallel()
	stub := `#!/usr/bin/env bash
if [[ "$1" == s3api ]]; then exit 254; fi # head-bucket: no such bucket
echo "awslocal $*"
`
	env := scriptEnv(t, map[string]string{"awslocal": stub}, "SAM_ARTIFACTS_BUCKET=my-bucket")
	out, code := runScript(t, env, time.Minute, script(t, "init/ready.d/10-artifacts-bucket.sh"))
	require.Equal(t, 0, code, out)
	assert.Equal(t, "awslocal s3 mb s3://my-bucket\nidem: artifacts bucket my-bucket ready\n", out)
}

// TestDeployNeedsTools runs deploy.sh where curl and make are missing: it names them
// instead of saying LocalStack does not answer.
func TestDeployNeedsTools(t *testing.T) {
	t.Parallel()
	// Only bash, dirname and stubs of sam, aws and go on PATH.
	bin := t.TempDir()
	for _, tool := range []string{"bash", "dirname"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	for _, stub := range []string{"sam", "aws", "go"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, stub), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	}
	out, code := runScript(t, []string{"PATH=" + bin}, time.Minute, script(t, "deploy.sh"))
	assert.Equal(t, 1, code, out)
	assert.Equal(t, "localstack: missing command(s): make curl (see localstack/README.md)\n", out)
}
