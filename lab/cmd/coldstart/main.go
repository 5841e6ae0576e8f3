// Command coldstart measures how long the example functions take from process start to
// their first served invocation, on this machine, against a DynamoDB Local it starts (or
// DYNAMODB_ENDPOINT):
//
//   - example-api in its local HTTP mode: from exec to the first response of a POST /orders
//     with a fresh Idempotency-Key (a claim, the order transaction, the response). The port
//     is dialled every 200 µs until it accepts; that instant is printed too, as the end of
//     init (configuration, SDK client, guard, listener).
//   - example-sqs in its stdin mode: from exec to the first byte of its printed batch
//     response, for a batch of one fresh credit message.
//
// Both binaries are built for this machine with the flags of `make build` (static,
// -tags lambda.norpc, stripped). Each is started -n times; the times are printed with their
// minimum, median and maximum.
//
//	cd lab && go run ./cmd/coldstart -n 10
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idem/internal/ddblocal"
	"github.com/idemkit/idem/internal/samtables"
)

var tables = map[string]string{
	"IdempotencyTable": "idempotency",
	"OrdersTable":      "orders",
	"LedgerTable":      "ledger",
}

func main() {
	n := flag.Int("n", 10, "starts per function")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		os.Exit(1)
	}
}

func run(n int) (err error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "coldstart-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	// The examples are built in the library's module, with its go.sum.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/idemkit/idem").Output()
	if err != nil {
		return fmt.Errorf("find the library's module: %w", err)
	}
	bins := map[string]string{}
	for _, fn := range []string{"example-api", "example-sqs"} {
		bins[fn] = filepath.Join(dir, fn)
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bins[fn], "./cmd/"+fn)
		build.Dir = strings.TrimSpace(string(root))
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", fn, err, out)
		}
	}

	endpoint := os.Getenv(ddblocal.EnvEndpoint)
	if endpoint == "" {
		server, err := ddblocal.Start(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, server.Stop()) }()
		endpoint = server.Endpoint()
	}
	if err := samtables.CreateTables(ctx, ddblocal.NewClient(endpoint), tables); err != nil {
		return err
	}
	env := append(os.Environ(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_LAMBDA_RUNTIME_API=",
		"AWS_ENDPOINT_URL_DYNAMODB="+endpoint,
		"IDEMPOTENCY_TABLE="+tables["IdempotencyTable"],
		"ORDERS_TABLE="+tables["OrdersTable"],
		"LEDGER_TABLE="+tables["LedgerTable"],
	)
	for _, fn := range []string{"example-api", "example-sqs"} {
		st, err := os.Stat(bins[fn])
		if err != nil {
			return err
		}
		var times, inits []time.Duration
		for range n {
			var d, init time.Duration
			if fn == "example-api" {
				init, d, err = startAPI(bins[fn], env)
				inits = append(inits, init)
			} else {
				d, err = startSQS(bins[fn], env)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", fn, err)
			}
			times = append(times, d)
		}
		report(fn, st.Size(), "start to first served invocation", times)
		if len(inits) > 0 {
			report(fn, st.Size(), "start to listening (init)", inits)
		}
	}
	return nil
}

func report(fn string, size int64, what string, times []time.Duration) {
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1e3, 'f', 1, 64) }
	all := make([]string, len(times))
	for i, d := range times {
		all[i] = ms(d)
	}
	fmt.Printf("%s (linux/%s binary, %d bytes): %s, ms: min %s, median %s, max %s (all: %s)\n",
		fn, goarch(), size, what, ms(sorted[0]), ms(sorted[len(sorted)/2]), ms(sorted[len(sorted)-1]), strings.Join(all, " "))
}

func goarch() string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func freshID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startAPI starts example-api on a free port and times it to listening and to its first
// response.
func startAPI(bin string, env []string) (listening, first time.Duration, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(env, "PORT="+port)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	body := `{"sku":"WIDGET-42","quantity":2,"amount_cents":1250}`
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer stop(cmd)
	addr := net.JoinHostPort("127.0.0.1", port)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			listening = time.Since(start)
			_ = c.Close()
			break
		}
		if time.Since(start) > 10*time.Second {
			return 0, 0, fmt.Errorf("not listening within 10s; log:\n%s", stderr.String())
		}
		time.Sleep(200 * time.Microsecond)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "coldstart-"+freshID())
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("first request: %w; log:\n%s", err, stderr.String())
	}
	first = time.Since(start)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return 0, 0, fmt.Errorf("first response %d, want 201; log:\n%s", resp.StatusCode, stderr.String())
	}
	return listening, first, nil
}

// startSQS runs example-sqs on a one-message batch and times it to its first output byte.
func startSQS(bin string, env []string) (time.Duration, error) {
	event := fmt.Sprintf(`{"Records":[{"messageId":"%s","receiptHandle":"AQEB%s","body":"{\"account_id\":\"acct-cold\",\"amount_cents\":100}",`+
		`"attributes":{"ApproximateReceiveCount":"1","SentTimestamp":"1748081554000"},"messageAttributes":{},`+
		`"md5OfBody":"0","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:ledger","awsRegion":"us-east-1"}]}`,
		freshID(), freshID())
	cmd := exec.Command(bin)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(event)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	r := bufio.NewReader(out)
	_, err = r.ReadByte()
	d := time.Since(start)
	rest, _ := r.ReadString(0)
	if werr := cmd.Wait(); err != nil || werr != nil {
		return 0, fmt.Errorf("no response: %w; log:\n%s", errors.Join(err, werr), stderr.String())
	}
	if strings.Contains(rest, `"itemIdentifier"`) {
		return 0, fmt.Errorf("the message failed: %s; log:\n%s", rest, stderr.String())
	}
	return d, nil
}

// stop ends the API by its process id.
func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
