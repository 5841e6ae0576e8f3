package proctest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/proctest"
)

// TestPickPort: the port is free on 127.0.0.1 and not above the limit asked for.
func TestPickPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
	}{
		{"Any", 0},
		{"Below55535", 55535},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A picked port is free when picked; another process (the tests of other
			// packages run beside this one) may take it before we bind it, which is why
			// the launchers try three ports (OnFreePort). So: one of three binds.
			var bindErr error
			for range 3 {
				port, err := proctest.PickPort(tc.limit)
				require.NoError(t, err)
				if tc.limit > 0 {
					assert.LessOrEqual(t, port, tc.limit)
				}
				l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				if bindErr = err; err == nil {
					_ = l.Close()
					break
				}
			}
			require.NoError(t, bindErr, "one of three picked ports can be bound")
		})
	}
}

// TestOnFreePort: start gets a new free port on each attempt, at most three, and the last
// error comes back; a start that succeeds ends the attempts.
func TestOnFreePort(t *testing.T) {
	t.Parallel()
	taken := errors.New("port taken")
	for _, tc := range []struct {
		name      string
		failures  int // attempts that fail before one succeeds
		wantCalls int
		wantErr   error
	}{
		{"FirstAttempt", 0, 1, nil},
		{"ThirdAttempt", 2, 3, nil},
		{"AllFail", 5, 3, taken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ports []int
			err := proctest.OnFreePort(context.Background(), 0, func(port int) error {
				ports = append(ports, port)
				if len(ports) <= tc.failures {
					return taken
				}
				return nil
			})
			assert.ErrorIs(t, err, tc.wantErr)
			assert.Len(t, ports, tc.wantCalls)
			for _, p := range ports {
				assert.Positive(t, p)
			}
		})
	}
	t.Run("ContextDone", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := proctest.OnFreePort(ctx, 0, func(int) error {
			calls++
			cancel()
			return taken
		})
		assert.ErrorIs(t, err, taken)
		assert.Equal(t, 1, calls, "no attempt after the context ended")
	})
}

// TestProc: a launched process is reaped on its own, and stopped by its process id with a
// signal, or killed when it ignores the signal.
func TestProc(t *testing.T) {
	t.Parallel()
	t.Run("ExitsOnItsOwn", func(t *testing.T) {
		t.Parallel()
		p, err := proctest.Launch(exec.Command("sh", "-c", "exit 3"))
		require.NoError(t, err)
		<-p.Done()
		var exit *exec.ExitError
		require.ErrorAs(t, p.Err(), &exit)
		assert.Equal(t, 3, exit.ExitCode())
		assert.NoError(t, p.Kill(), "killing an exited process does nothing")
		assert.NoError(t, p.Stop(syscall.SIGTERM, time.Minute), "nor does stopping it")
	})
	t.Run("Kill", func(t *testing.T) {
		t.Parallel()
		p, err := proctest.Launch(exec.Command("sleep", "60"))
		require.NoError(t, err)
		assert.Positive(t, p.PID())
		require.NoError(t, p.Kill())
		requireDone(t, p)
		assert.ErrorContains(t, p.Err(), "killed")
	})
	t.Run("StopBySignal", func(t *testing.T) {
		t.Parallel()
		p, err := proctest.Launch(exec.Command("sleep", "60"))
		require.NoError(t, err)
		require.NoError(t, p.Stop(syscall.SIGTERM, time.Minute))
		requireDone(t, p)
		assert.ErrorContains(t, p.Err(), "terminated")
	})
	t.Run("StopIgnored", func(t *testing.T) {
		t.Parallel()
		// The shell ignores SIGTERM and execs sleep, which keeps the disposition.
		p, err := proctest.Launch(exec.Command("sh", "-c", `trap "" TERM; exec sleep 60`))
		require.NoError(t, err)
		waitExec(t, p.PID(), "sleep")
		err = p.Stop(syscall.SIGTERM, 50*time.Millisecond)
		assert.ErrorContains(t, err, "was killed")
		requireDone(t, p)
		assert.ErrorContains(t, p.Err(), "killed")
	})
}

// requireDone fails t unless p has exited.
func requireDone(t *testing.T, p *proctest.Proc) {
	t.Helper()
	select {
	case <-p.Done():
	default:
		t.Fatal("the process is still running")
	}
}

// waitExec waits until process pid runs the command name, so that a signal sent next meets
// it rather than the shell before its trap.
func waitExec(t *testing.T, pid int, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err == nil && string(comm) == name+"\n" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d never ran %s", pid, name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// RepoRoot finds the root module's directory from a package of it and from a directory of
// a nested module (the lab's), and fails outside the repository.
func TestRepoRoot(t *testing.T) {
	root, err := proctest.RepoRoot()
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(mod), "module github.com/idemkit/idem\n"))

	t.Chdir(filepath.Join(root, "lab"))
	got, err := proctest.RepoRoot()
	require.NoError(t, err)
	assert.Equal(t, root, got)

	t.Chdir(t.TempDir())
	_, err = proctest.RepoRoot()
	assert.Error(t, err)
}
