// Package rie runs a Lambda function's bootstrap binary under the AWS Lambda Runtime
// Interface Emulator (aws-lambda-rie), AWS's own local stand-in for the Lambda service:
// the function runs its real Lambda path (lambda.Start against the Runtime API that the
// emulator serves and names in AWS_LAMBDA_RUNTIME_API), and a test invokes it with an
// HTTP POST of an event, as Lambda's event source mappings invoke it.
//
// `make deps` builds the emulator into <repo>/.cache/bin (go install
// github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie at the version
// the Makefile pins); [EnvBin] names another binary. It runs without root and without
// /var/task or /var/runtime: it is given the bootstrap's path, and the addresses of its
// two servers on 127.0.0.1. When it is missing, the tests that ask skip, unless
// [EnvRequire] is set (make test sets it): then they fail.
package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/proctest"
)

// Environment variables read by this package.
const (
	// EnvRequire, when set, makes a test that cannot run the emulator fail instead of
	// skip.
	EnvRequire = "IDEM_REQUIRE_RIE"
	// EnvBin names the aws-lambda-rie binary; by default <repo>/.cache/bin/aws-lambda-rie.
	EnvBin = "AWS_LAMBDA_RIE"
)

// Version is the emulator's version that `make deps` installs (the Makefile's
// RIE_VERSION), a pseudo-version of its module.
const Version = "v0.0.0-20261030222936-bef5c4ba774d"

// ErrNotInstalled means the aws-lambda-rie binary is missing.
var ErrNotInstalled = errors.New("rie: aws-lambda-rie not installed: run `make deps` (GOBIN=.cache/bin go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@" + Version + ")")

// InvokePath is the emulator's invocation endpoint, the path of Lambda's Invoke API for
// its one function.
const InvokePath = "/2015-03-31/functions/function/invocations"

// Timeouts of the emulator.
const (
	// startTimeout bounds how long Start waits for the emulator to listen.
	startTimeout = 30 * time.Second
	// stopGrace is how long Stop waits after SIGTERM, on which the emulator kills the
	// function's process and exits.
	stopGrace = 10 * time.Second
)

// Function is a bootstrap binary served by a running emulator.
type Function struct {
	proc   *proctest.Proc
	url    string // the invocation endpoint
	output string // file of the emulator's and the function's stdout and stderr
}

// Start runs the emulator on free ports of 127.0.0.1 with bootstrap as the function, in a
// process of environment env ("NAME=value"), which the emulator passes on to the
// function. The emulator starts the function at the first invocation. When tb ends the
// emulator is stopped, by its process id, and its output is logged if tb failed. Start
// skips tb, or fails it under [EnvRequire], when the emulator is not installed.
func Start(tb testing.TB, bootstrap string, env []string) *Function {
	tb.Helper()
	bin, err := locate()
	if err != nil {
		proctest.Unavailable(tb, EnvRequire, err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var f *Function
	err = proctest.OnFreePort(ctx, 0, func(invokePort int) error {
		apiPort, err := proctest.PickPort(0)
		if err != nil {
			return err
		}
		f, err = launch(ctx, tb, bin, bootstrap, env, invokePort, apiPort)
		return err
	})
	if err != nil {
		tb.Fatalf("rie: %v", err)
	}
	return f
}

// launch starts the emulator on the two ports and waits until both listen.
func launch(ctx context.Context, tb testing.TB, bin, bootstrap string, env []string, invokePort, apiPort int) (*Function, error) {
	tb.Helper()
	invokeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(invokePort))
	apiAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	out, err := os.CreateTemp(tb.TempDir(), "aws-lambda-rie-*.log")
	if err != nil {
		return nil, err
	}
	defer func() { _ = out.Close() }() // the child writes through its own descriptor
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", apiAddr,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap) // the function's working directory, as /var/task in Lambda
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	proc, err := proctest.Launch(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	f := &Function{proc: proc, url: "http://" + invokeAddr + InvokePath, output: out.Name()}
	tb.Cleanup(func() {
		if err := f.Stop(); err != nil {
			tb.Errorf("rie: %v", err)
		}
		if tb.Failed() {
			tb.Logf("rie: output of aws-lambda-rie and the function:\n%s", f.Output())
		}
	})
	// The emulator exits if one of its ports is taken: one that accepts a connection may
	// be another process's, so the emulator must still run after both accept.
	for _, addr := range []string{apiAddr, invokeAddr} {
		if err := f.waitListening(ctx, addr); err != nil {
			return nil, err
		}
	}
	select {
	case <-f.proc.Done():
		return nil, fmt.Errorf("aws-lambda-rie exited after its ports accepted connections:\n%s", f.Output())
	case <-time.After(50 * time.Millisecond):
		return f, nil
	}
}

// waitListening waits until addr accepts a connection while the emulator runs. It fails
// if the emulator exits first, as it does when one of its ports is taken.
func (f *Function) waitListening(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		select {
		case <-f.proc.Done():
			err := f.proc.Err()
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("aws-lambda-rie exited (%w) before %s listened:\n%s", err, addr, f.Output())
		default:
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("aws-lambda-rie: %s not listening: %w", addr, ctx.Err())
		case <-f.proc.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Invoke posts payload to the emulator's invocation endpoint with the request id
// requestID (the X-Amzn-RequestId header, which the emulator hands the function as its
// invocation's id) and returns the response's status code and body.
func (f *Function) Invoke(ctx context.Context, requestID string, payload []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amzn-RequestId", requestID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("rie: invoke: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("rie: invoke: read response: %w", err)
	}
	return resp.StatusCode, body, nil
}

// Output returns what the emulator and the function wrote to stdout and stderr so far.
func (f *Function) Output() string {
	data, err := os.ReadFile(f.output)
	if err != nil {
		return "rie: " + err.Error()
	}
	return string(data)
}

// Stop stops the emulator by its process id with SIGTERM, on which it kills the
// function's process and exits; after a grace period it is killed.
func (f *Function) Stop() error {
	return f.proc.Stop(syscall.SIGTERM, stopGrace)
}

// locate returns the emulator's binary.
func locate() (string, error) {
	bin := os.Getenv(EnvBin)
	if bin == "" {
		root, err := proctest.RepoRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
		bin = filepath.Join(root, ".cache", "bin", "aws-lambda-rie")
	}
	if _, err := exec.LookPath(bin); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	return bin, nil
}
