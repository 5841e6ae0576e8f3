// Package proctest runs processes for tests, and stops them by process id:
//   - the example binaries, built with the go command into the test's temporary
//     directory and started with a clean environment that points the AWS SDK at
//     DynamoDB Local ([Build], [BuildLambda], [Env], [Start], [Run]);
//   - the servers the tests run against (DynamoDB Local, PostgreSQL, Redis), each on a
//     free port of 127.0.0.1 ([OnFreePort], [Launch], [Proc.Kill], [Proc.Stop]).
package proctest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Build compiles the main package pkg (an import path) into tb's temporary directory and
// returns the binary's path. It builds in the directory of the module that holds pkg, so
// that a test in another module (the lab's) builds an example with the example's go.sum.
// It fails tb if the build fails.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), path.Base(pkg))
	build(tb, pkg, bin, nil)
	return bin
}

// BuildLambda compiles the main package pkg as [Build] does, but as the Makefile builds a
// Lambda function for the provided.al2023 runtime, for this machine's platform: static (no
// cgo), tagged lambda.norpc, and named bootstrap. It returns the binary's path.
func BuildLambda(tb testing.TB, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "bootstrap")
	build(tb, pkg, bin, []string{"-tags", "lambda.norpc", "-trimpath"}, "CGO_ENABLED=0")
	return bin
}

// build runs go build for pkg in its module's directory, with flags and the extra
// environment env, writing bin.
func build(tb testing.TB, pkg, bin string, flags []string, env ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := exec.CommandContext(ctx, "go", "list", "-e", "-f", "{{with .Module}}{{.Dir}}{{end}}", pkg).Output()
	if err != nil {
		tb.Fatalf("proctest: go list %s: %v", pkg, err)
	}
	args := append(append([]string{"build", "-o", bin}, flags...), pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = strings.TrimSpace(string(dir))
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("proctest: go build %s: %v\n%s", pkg, err, out)
	}
}

// Env returns an environment for a local run against the DynamoDB at endpoint: PATH and
// HOME from the test's own environment, region and static credentials for DynamoDB Local,
// and AWS_ENDPOINT_URL_DYNAMODB, followed by extra ("NAME=value"). Nothing else is
// inherited, so in particular not AWS_LAMBDA_RUNTIME_API or a profile.
func Env(endpoint string, extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
	}
	return append(env, extra...)
}

// Setenv sets the environment of [Env] in the test's own process for the rest of t, and
// clears what else the AWS SDK or Lambda would read (a profile, a session token, the
// endpoint for every service, the function name), so code run in-process reads the
// configuration a process started with Env would. t must not be parallel.
func Setenv(t *testing.T, endpoint string) {
	t.Helper()
	for _, kv := range Env(endpoint,
		"AWS_ENDPOINT_URL=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
		"AWS_CONFIG_FILE="+filepath.Join(t.TempDir(), "none"), "AWS_LAMBDA_FUNCTION_NAME=",
		"AWS_LAMBDA_RUNTIME_API=") {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago (see [PickPort]).
func FreePort(tb testing.TB) string {
	tb.Helper()
	port, err := PickPort(0)
	if err != nil {
		tb.Fatal(err)
	}
	return strconv.Itoa(port)
}

// Run runs bin to completion with args, env and stdin, and returns its stdout, stderr and
// exit code. It fails tb if the process cannot be run or takes longer than a minute.
func Run(tb testing.TB, bin string, env []string, stdin []byte, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) || ctx.Err() != nil {
		tb.Fatalf("proctest: run %s: %v\n%s", filepath.Base(bin), err, errOut.String())
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// Process is a started binary.
type Process struct {
	proc   *Proc
	output string // file of stdout and stderr; the OS keeps concurrent writes whole
}

// Start starts bin with args and env. When tb ends the process is killed, by its id, if it
// is still running, and its output is logged if tb failed.
func Start(tb testing.TB, bin string, env []string, args ...string) *Process {
	tb.Helper()
	p := &Process{output: filepath.Join(tb.TempDir(), filepath.Base(bin)+".log")}
	out, err := os.Create(p.output)
	if err != nil {
		tb.Fatalf("proctest: %v", err)
	}
	defer func() { _ = out.Close() }() // the child writes through its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	if p.proc, err = Launch(cmd); err != nil {
		tb.Fatalf("proctest: start %s: %v", bin, err)
	}
	tb.Cleanup(func() {
		if err := p.proc.Kill(); err != nil {
			tb.Errorf("proctest: %s: %v", filepath.Base(bin), err)
		}
		if tb.Failed() {
			tb.Logf("proctest: output of %s:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error {
	return p.proc.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and returns its exit code, or -1 and
// false if it is still running.
func (p *Process) Wait(timeout time.Duration) (code int, exited bool) {
	select {
	case <-p.proc.Done():
		return p.proc.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return -1, false
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.proc.Done():
		return true
	default:
		return false
	}
}

// Output returns what the process wrote to stdout and stderr so far.
func (p *Process) Output() string {
	data, err := os.ReadFile(p.output)
	if err != nil {
		return "proctest: " + err.Error()
	}
	return string(data)
}

// rootModule is the first line of the repository root's go.mod; the nested modules (lab,
// pgstore, ...) have go.mod files of their own below it.
const rootModule = "module github.com/idemkit/idem\n"

// RepoRoot walks up from the working directory (a package directory under go test, in
// any module of the repository) to the directory holding the root module's go.mod, where
// `make deps` installs the tests' servers and tools (.cache).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(mod), rootModule) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/idemkit/idem above the working directory")
		}
		dir = parent
	}
}
