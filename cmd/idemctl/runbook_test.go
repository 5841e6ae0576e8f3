package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/proctest"
)

// The function the README's runbook repairs: example-api deployed as orders-api, whose
// guard has the operation create-order and no WithScope, so its scope is the function's
// name.
const (
	runbookFunction = "orders-api"
	exampleAPI      = "github.com/idemkit/idem/cmd/example-api"
	orderBody       = `{"sku":"WIDGET-1","quantity":2,"amount_cents":1250}`
)

// TestRunbook makes a key stuck as a crash does (example-api killed by its process id
// while its request runs, after the claim and before the commit), checks that a retry gets
// 409, follows README's "A stuck key: the runbook" with its commands exactly as written
// (run by sh, the raw key in $KEY), and checks that the next request then runs: one order,
// created by the request that took the key over.
func TestRunbook(t *testing.T) {
	t.Parallel()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	idemTable := ddblocal.NewTable(t, client)
	orders := ordersTable(t, client)
	apiBin := proctest.Build(t, exampleAPI)
	ctlBin := proctest.Build(t, pkg)
	const key = "order-2026-11-27-0042" // what the customer quotes; never printed by idemctl

	apiEnv := func(endpoint, port string) []string {
		return proctest.Env(endpoint, "IDEMPOTENCY_TABLE="+idemTable, "ORDERS_TABLE="+orders,
			"PORT="+port, "AWS_LAMBDA_FUNCTION_NAME="+runbookFunction)
	}

	// The owner: its DynamoDB calls go through a proxy that holds the transaction that
	// would commit the order with the record, so the request is killed mid-run.
	held := make(chan struct{})
	proxy := holdingProxy(t, endpoint, "DynamoDB_20120810.TransactWriteItems", held)
	port := proctest.FreePort(t)
	owner := proctest.Start(t, apiBin, apiEnv(proxy, port))
	base := "http://127.0.0.1:" + port
	waitServing(t, owner, base)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		_, _ = post(base, key) // fails when the owner dies
	}()
	select {
	case <-held:
	case <-sent:
		t.Fatalf("the request ended before its commit:\n%s", owner.Output())
	}
	require.NoError(t, owner.Signal(syscall.SIGKILL))
	_, exited := owner.Wait(30 * time.Second)
	require.True(t, exited, "example-api did not die")
	<-sent

	// A new container: every retry is answered 409 while the dead owner's lease runs.
	port = proctest.FreePort(t)
	next := proctest.Start(t, apiBin, apiEnv(endpoint, port))
	base = "http://127.0.0.1:" + port
	waitServing(t, next, base)
	resp, err := post(base, key)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	// The runbook, as README prints it, run by sh with idemctl on the PATH.
	commands := runbookCommands(t)
	var ran []string
	env := append(proctest.Env(endpoint, "IDEMPOTENCY_TABLE="+idemTable, "KEY="+key),
		"PATH="+filepath.Dir(ctlBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	sh := func(command string) (stdout, stderr string, code int) {
		t.Helper()
		require.Contains(t, commands, command, "README's runbook shows the command")
		ran = append(ran, command)
		stdout, stderr, code = proctest.Run(t, "/bin/sh", env, nil, "-c", command)
		assert.NotContains(t, stdout+stderr, key, "idemctl never prints the raw key")
		return stdout, stderr, code
	}
	storedKey := `orders-api\.create-order#[0-9a-f]{64}`

	// 1. Find the record: by the raw key alone, then by scope, operation and key.
	stdout, stderr, code := sh(`idemctl find --key "$KEY"`)
	require.Equal(t, exitOK, code, "%s\n%s", stdout, stderr)
	assert.Regexp(t, `^scope        orders-api\noperation    create-order\nstored key   `+storedKey+`\n`, stdout)
	assert.Contains(t, stdout, "status       INPROGRESS (lease running: a request now gets 409 or waits)")
	assert.Regexp(t, `^found 1 record\(s\) of the key \(tenant none\) under 1 key prefix\(es\): orders-api\.create-order\n`+
		`scanned 1 item\(s\) of table \S+ \([0-9.]+ read units\), then read 1 record\(s\) \([0-9.]+ read units\)\n$`, stderr)

	show := `idemctl show --scope orders-api --operation create-order --key "$KEY"`
	stdout, stderr, code = sh(show)
	require.Equal(t, exitOK, code, "%s\n%s", stdout, stderr)
	assert.Regexp(t, `(?m)^stored key +`+storedKey+`$`, stdout)
	assert.Contains(t, stdout, "status       INPROGRESS (lease running: a request now gets 409 or waits)")

	// 3. See how many.
	stdout, stderr, code = sh("idemctl list --scope orders-api")
	require.Equal(t, exitOK, code, "%s\n%s", stdout, stderr)
	assert.Regexp(t, `(?m)^in-progress +`+storedKey+` `, stdout)
	assert.Regexp(t, `^1 record\(s\); scanned 1 item\(s\)`, stderr)

	// 4. Release the dead owner's lease, typing yes on a terminal as README says.
	release := `idemctl release --scope orders-api --operation create-order --key "$KEY"`
	require.Contains(t, commands, release)
	ran = append(ran, release)
	out, asked, code := onTerminal(t, env, release, "yes\n")
	require.Equal(t, exitOK, code, out)
	assert.Contains(t, out, "The owner's lease is still running. Release it only if the owner is known dead")
	if asked {
		assert.Contains(t, out, "Type yes to release this record: ")
	}
	assert.Contains(t, out, "Released: the next request with this key takes it over and runs the handler.")
	assert.NotContains(t, out, key)

	stdout, stderr, code = sh(show)
	require.Equal(t, exitOK, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "status       INPROGRESS (lease ended, nobody retried: the next request takes over)")
	assert.Contains(t, stdout, "owner token  released…")

	stdout, _, code = sh("idemctl help")
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "idemctl find    [table flags] --key K [--tenant T]")
	assert.ElementsMatch(t, commands, slices.Compact(slices.Sorted(slices.Values(ran))), "the test runs every command of the runbook")

	// The next request runs: it takes the key over and creates the order, once.
	resp, err = post(base, key)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Idempotent-Replayed"))
	resp, err = post(base, key)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	count, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(orders), Select: types.SelectCount})
	require.NoError(t, err)
	assert.Equal(t, int32(1), count.Count, "one order: the dead owner's never committed")
}

// onTerminal runs command with sh on a new terminal (script(1)), typing typed, and returns
// what the terminal showed, true, and the exit code. Without script(1) it runs command
// with --yes, which README gives for scripts instead of the question, and returns false.
func onTerminal(t *testing.T, env []string, command, typed string) (out string, asked bool, code int) {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Logf("script(1) is not installed: running %q with --yes", command)
		stdout, stderr, code := proctest.Run(t, "/bin/sh", env, nil, "-c", command+" --yes")
		return stdout + stderr, false, code
	}
	stdout, _, code := proctest.Run(t, script, append(env, "SHELL=/bin/sh"), []byte(typed), "-qec", command, "/dev/null")
	return stdout, true, code
}

// runbookCommands returns the idemctl commands README's runbook shows in code spans,
// those meant to be run as they are: without an ellipsis or an optional part.
func runbookCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "### A stuck key: the runbook\n")
	require.True(t, ok, "README has the runbook")
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, m := range regexp.MustCompile("`(idemctl [^`]*)`").FindAllStringSubmatch(section, -1) {
		if !strings.ContainsAny(m[1], "[…") {
			out = append(out, m[1])
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// ordersTable creates the orders table example-api writes, as the SAM template declares
// it (a string key "id"), and deletes it when t ends.
func ordersTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	name := "orders-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-") + "-" + time.Now().Format("150405.000000000")
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// holdingProxy returns the URL of a proxy to endpoint that passes every DynamoDB call on
// but holds each one of the target (the X-Amz-Target header) until its client hangs up,
// closing held when it first holds one.
func holdingProxy(t *testing.T, endpoint, target string, held chan<- struct{}) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	stop := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != target {
			rp.ServeHTTP(w, r)
			return
		}
		once.Do(func() { close(held) })
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv.URL
}

// post sends the order of the runbook to example-api at base with the Idempotency-Key key.
func post(base, key string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(orderBody))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp, resp.Body.Close()
}

// waitServing polls example-api at base until it answers, or fails t if it exits first.
func waitServing(t *testing.T, p *proctest.Process, base string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && !p.Exited() {
		resp, err := client.Get(base + "/orders/none")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("example-api did not answer at %s:\n%s", base, p.Output())
}
