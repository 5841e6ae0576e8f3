// Package localstack tests the LocalStack scripts of this directory without Docker or
// LocalStack: each script runs under bash with stub commands first on its PATH (aws,
// docker), and a local HTTP server plays the AWS CLI's answers and LocalStack's HTTP API.
package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// awsStub is the aws command the scripts find first on their PATH: it sends its arguments,
// NUL-separated, to the fake at $FAKE_AWS and prints the answer (on stderr, exiting 255 as
// the AWS CLI does, when the fake says the call failed).
const awsStub = `#!/usr/bin/env bash
answer="$(mktemp)"
status="$(printf '%s\0' "$@" | curl -s -o "${answer}" -w '%{http_code}' --data-binary @- "${FAKE_AWS}")"
if [[ "${status}" != 200 ]]; then
	cat "${answer}" >&2
	rm -f "${answer}"
	exit 255
fi
cat "${answer}"
rm -f "${answer}"
`

// stack is a fake deployment of infra/template.yaml: the AWS CLI calls smoke.sh makes,
// answered from memory, and the HTTP API when the stack has one.
type stack struct {
	apiID   string // the APIID output: "unknown" when LocalStack skipped the HTTP API
	httpAPI bool   // whether the HTTP API answers; else LocalStack's 404 for unknown APIs
	sendErr string // when set, sqs send-message fails with this message

	mu       sync.Mutex
	orders   map[string]bool
	replies  map[string]string // idempotency key → the first response body
	credited map[string]bool   // Idempotency-Key attributes already credited
	balance  map[string]int
	sends    int
	calls    []string // "service operation", in order
}

func newStack(apiID string, httpAPI bool) *stack {
	return &stack{apiID: apiID, httpAPI: httpAPI, orders: map[string]bool{}, replies: map[string]string{},
		credited: map[string]bool{}, balance: map[string]int{}}
}

// counts returns how many orders the stack holds, how many messages were sent, and the
// AWS CLI calls made.
func (s *stack) counts() (orders, sends int, calls []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders), s.sends, append([]string(nil), s.calls...)
}

// ServeHTTP answers the aws stub on /aws and plays the HTTP API on every other path.
func (s *stack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/aws" {
		body, _ := io.ReadAll(r.Body)
		args := strings.Split(strings.TrimSuffix(string(body), "\x00"), "\x00")
		out, err := s.cli(args)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, out)
		return
	}
	if !s.httpAPI || !strings.HasPrefix(r.Host, s.apiID+".execute-api.localhost.localstack.cloud:") {
		// LocalStack's answer for an API it does not know.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message": "The API id 'unknown' does not correspond to a deployed API Gateway API"}`)
		return
	}
	status, headers, resp := s.orderAPI(r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"))
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	fmt.Fprint(w, resp)
}

// orderAPI answers as example-api does: POST /orders once per key, replayed after; GET
// /orders/{id}.
func (s *stack) orderAPI(method, path, key string) (int, map[string]string, string) {
	switch {
	case method == http.MethodPost && path == "/orders":
		if body, ok := s.replies[key]; ok {
			return http.StatusCreated, map[string]string{"Content-Type": "application/json", "Idempotent-Replayed": "true"}, body
		}
		id := fmt.Sprintf("%032x", len(s.orders)+1)
		s.orders[id] = true
		s.replies[key] = `{"id":"` + id + `","sku":"WIDGET-42","quantity":2,"amount_cents":1250}`
		return http.StatusCreated, map[string]string{"Content-Type": "application/json"}, s.replies[key]
	case method == http.MethodGet && s.orders[strings.TrimPrefix(path, "/orders/")]:
		return http.StatusOK, map[string]string{"Content-Type": "application/json"}, `{}`
	}
	return http.StatusNotFound, map[string]string{"Content-Type": "application/problem+json"},
		`{"detail":"no such order","status":404,"title":"Not Found","type":"about:blank"}`
}

var (
	outputQuery = regexp.MustCompile(`OutputKey=='(\w+)'`)
	accountKey  = regexp.MustCompile(`"account_id":\{"S":"([^"]+)"\}`)
	orderKey    = regexp.MustCompile(`"id":\{"S":"([0-9a-f]+)"\}`)
	eventKey    = regexp.MustCompile(`"idempotency-key":"([^"]+)"`)
)

// cli answers one AWS CLI call, by its arguments.
func (s *stack) cli(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("aws stub: too few arguments: %q", args)
	}
	s.calls = append(s.calls, args[0]+" "+args[1])
	flag := func(name string) string {
		for i, a := range args[:len(args)-1] {
			if a == name {
				return args[i+1]
			}
		}
		return ""
	}
	switch args[0] + " " + args[1] {
	case "cloudformation describe-stacks":
		outputs := map[string]string{"APIID": s.apiID, "APIFunctionName": "api-fn", "QueueURL": "http://sqs/ledger",
			"OrdersTableName": "orders", "LedgerTableName": "ledger"}
		return outputs[outputQuery.FindStringSubmatch(flag("--query"))[1]], nil
	case "dynamodb scan":
		return strconv.Itoa(len(s.orders)), nil
	case "dynamodb get-item":
		if flag("--table-name") == "orders" {
			id := orderKey.FindStringSubmatch(flag("--key"))[1]
			if s.orders[id] {
				return id, nil
			}
			return "None", nil
		}
		if b, ok := s.balance[accountKey.FindStringSubmatch(flag("--key"))[1]]; ok {
			return strconv.Itoa(b), nil
		}
		return "None", nil
	case "lambda invoke":
		return "", s.invoke(strings.TrimPrefix(flag("--payload"), "fileb://"), args[len(args)-1])
	case "sqs send-message":
		if s.sendErr != "" {
			return "", fmt.Errorf("%s", s.sendErr)
		}
		s.sends++
		var credit struct {
			AccountID string `json:"account_id"`
			Amount    int    `json:"amount_cents"`
		}
		if err := json.Unmarshal([]byte(flag("--message-body")), &credit); err != nil {
			return "", err
		}
		// The consumer, idempotent per Idempotency-Key attribute.
		if key := flag("--message-attributes"); !s.credited[key] {
			s.credited[key] = true
			s.balance[credit.AccountID] += credit.Amount
		}
		return fmt.Sprintf("msg-%d", s.sends), nil
	case "sqs get-queue-attributes":
		return "0\t0", nil
	}
	return "", fmt.Errorf("aws stub: unexpected call %q", args)
}

// invoke plays example-api invoked with the event in file, writing the function's response
// to out as the AWS CLI does.
func (s *stack) invoke(file, out string) error {
	event, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	status, headers, body := s.orderAPI(http.MethodPost, "/orders", eventKey.FindStringSubmatch(string(event))[1])
	resp, err := json.Marshal(map[string]any{"statusCode": status, "headers": headers, "body": body})
	if err != nil {
		return err
	}
	return os.WriteFile(out, resp, 0o600)
}

// serve starts the fake on 127.0.0.1 and returns the environment that points the scripts
// at it, with the stubs first on PATH.
func (s *stack) serve(t *testing.T) []string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return scriptEnv(t, map[string]string{"aws": awsStub}, "LOCALSTACK_ENDPOINT="+srv.URL, "FAKE_AWS="+srv.URL+"/aws")
}

// scriptEnv returns an environment whose PATH starts with a directory holding the given
// stub commands, followed by extra variables.
func scriptEnv(t *testing.T, stubs map[string]string, extra ...string) []string {
	t.Helper()
	bin := t.TempDir()
	for name, script := range stubs {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755))
	}
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	return append(env, extra...)
}

// runScript runs bash with args (a script path, or -c and a command) in env, and returns its
// combined output and exit code. It fails t if bash cannot run or takes over timeout.
func runScript(t *testing.T, env []string, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "bash %v did not finish in %s:\n%s", args, timeout, out.String())
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("bash %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}
