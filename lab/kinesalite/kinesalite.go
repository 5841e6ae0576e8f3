// Package kinesalite runs kinesalite, an implementation of the Amazon Kinesis API in
// Node, for the lab's Kinesis end-to-end tests, the way dynamotest runs DynamoDB Local: in
// memory, on a free port of 127.0.0.1, one per test binary, started by the first test
// that asks ([Endpoint], [Client]) and stopped by [Main].
//
// `make deps` installs it (npm install --prefix .cache/kinesalite kinesalite@3.3.3,
// without the optional native leveldown, which only its on-disk mode uses); [EnvDir]
// names another install. Node runs it. When Node or the package is missing, the tests that
// ask skip, unless [EnvRequire] is set (make test sets it): then they fail.
package kinesalite

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/idemkit/idem/internal/proctest"
)

// Environment variables read by this package.
const (
	// EnvRequire, when set, makes a test that cannot start kinesalite fail instead of
	// skip.
	EnvRequire = "IDEM_REQUIRE_KINESIS"
	// EnvDir names the npm prefix kinesalite is installed into (holding
	// node_modules/kinesalite); by default <repo>/.cache/kinesalite.
	EnvDir = "KINESALITE_DIR"
)

// ErrNotInstalled means Node or the kinesalite package is missing.
var ErrNotInstalled = errors.New("kinesalite: not installed: run `make deps` (npm install --prefix .cache/kinesalite --omit=optional kinesalite@3.3.3; Node runs it)")

//go:embed launcher.js
var launcher string

// startTimeout bounds how long Start waits for kinesalite to answer.
const startTimeout = 30 * time.Second

// Server is a kinesalite process started by [Start].
type Server struct {
	proc     *proctest.Proc
	endpoint string
	stdin    *os.File // the write end of its standard input; never written
	out      *syncBuffer
	stopOnce sync.Once
	stopErr  error
}

// Start runs kinesalite in memory on a free port of 127.0.0.1 and returns once it
// answers, or with an error wrapping [ErrNotInstalled]. The caller must call
// [Server.Stop]; should the calling process die first, kinesalite exits on its own.
func Start(ctx context.Context) (*Server, error) {
	node, dir, err := locate()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var s *Server
	err = proctest.OnFreePort(ctx, 0, func(port int) error {
		s, err = launch(ctx, node, dir, port)
		return err
	})
	return s, err
}

func launch(ctx context.Context, node, dir string, port int) (*Server, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("kinesalite: %w", err)
	}
	cmd := exec.Command(node, "-e", launcher, dir, strconv.Itoa(port))
	out := &syncBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, out, out
	proc, err := proctest.Launch(cmd)
	_ = stdinR.Close()
	if err != nil {
		_ = stdinW.Close()
		return nil, fmt.Errorf("kinesalite: start %s: %w", node, err)
	}
	s := &Server{proc: proc, endpoint: "http://127.0.0.1:" + strconv.Itoa(port), stdin: stdinW, out: out}
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// syncBuffer collects the process's output for error messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	const limit = 64 << 10 // the start of the output is where errors show
	if room := limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitReady polls the endpoint until any HTTP response comes back.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint, nil)
		if err != nil {
			return fmt.Errorf("kinesalite: %w", err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-s.proc.Done():
			return fmt.Errorf("kinesalite: exited before answering (%w); output:\n%s", s.proc.Err(), s.out.String())
		case <-ctx.Done():
			return fmt.Errorf("kinesalite: no answer on %s: %w; output:\n%s", s.endpoint, ctx.Err(), s.out.String())
		case <-tick.C:
		}
	}
}

// Endpoint returns the server's URL, such as "http://127.0.0.1:41234".
func (s *Server) Endpoint() string { return s.endpoint }

// Stop kills kinesalite by its process id and waits for it to exit.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		// The pipe only tells the launcher we are alive; its close error cannot matter.
		defer func() { _ = s.stdin.Close() }()
		if err := s.proc.Kill(); err != nil {
			s.stopErr = fmt.Errorf("kinesalite: %w", err)
		}
	})
	return s.stopErr
}

// locate finds node and the kinesalite package directory.
func locate() (node, dir string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w: node not found: %w", ErrNotInstalled, err)
	}
	prefix := os.Getenv(EnvDir)
	if prefix == "" {
		root, err := proctest.RepoRoot()
		if err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
		prefix = filepath.Join(root, ".cache", "kinesalite")
	}
	dir = filepath.Join(prefix, "node_modules", "kinesalite")
	if _, err := os.Stat(filepath.Join(dir, "index.js")); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	return node, dir, nil
}

// shared is the test binary's one kinesalite, started by the first [Endpoint].
var shared struct {
	mu      sync.Mutex
	started bool
	server  *Server
	err     error
}

// Endpoint returns the URL of the test binary's kinesalite, started on the first call. If
// it cannot start, tb skips, or fails when [EnvRequire] is set. It is safe for
// concurrent use.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	shared.mu.Lock()
	if !shared.started {
		shared.started = true
		shared.server, shared.err = Start(context.Background())
	}
	server, err := shared.server, shared.err
	shared.mu.Unlock()
	if err != nil {
		proctest.Unavailable(tb, EnvRequire, err)
	}
	return server.Endpoint()
}

// Main runs a test binary's tests and stops its kinesalite when they end; call it from
// TestMain. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		if err := shared.server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Client returns a Kinesis client for [Endpoint].
func Client(tb testing.TB) *kinesis.Client {
	tb.Helper()
	return NewClient(Endpoint(tb))
}

// NewClient returns a Kinesis client for a local endpoint: region us-east-1 and static
// dummy credentials (kinesalite checks only that requests are signed).
func NewClient(endpoint string) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "kinesalite"}, nil
		}),
	})
}
