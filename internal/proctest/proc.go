package proctest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// PickPort returns a TCP port of 127.0.0.1 that was free a moment ago, no higher than limit
// (0: any port). A Redis Cluster node, for one, needs its port plus 10000 free as well.
func PickPort(limit int) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("proctest: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if limit <= 0 || port <= limit {
			return port, nil
		}
	}
	return 0, fmt.Errorf("proctest: no free port up to %d", limit)
}

// portAttempts is how many free ports [OnFreePort] tries.
const portAttempts = 3

// OnFreePort calls start with a free port of 127.0.0.1 no higher than limit (see
// [PickPort]) until start returns nil, at most three times: a port found free can be
// taken before the server binds it. It returns start's last error, and tries no more once
// ctx is done.
func OnFreePort(ctx context.Context, limit int, start func(port int) error) error {
	var err error
	for range portAttempts {
		var port int
		if port, err = PickPort(limit); err != nil {
			return err
		}
		if err = start(port); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Proc is a process started by [Launch]. It is reaped in the background, and stopped by
// its process id. Its methods are safe for concurrent use.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

// Launch starts cmd, which the caller has set up (arguments, environment, output,
// credentials), and returns the running process.
func Launch(cmd *exec.Cmd) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done returns a channel closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err returns how the process exited (exec.Cmd.Wait's error), once [Proc.Done] is closed;
// nil before.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Kill kills the process with SIGKILL, by its process id, and waits until it is reaped.
// A process that has exited already is left alone.
func (p *Proc) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", p.PID(), err)
	}
	<-p.done
	return nil
}

// Stop sends sig to the process, by its process id, and waits up to grace for it to exit.
// After grace it kills the process (see [Proc.Kill]) and returns an error saying so. A
// process that has exited already is left alone.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal pid %d: %w", p.PID(), err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("pid %d ignored %v for %v and was killed", p.PID(), sig, grace)
}

// Unavailable skips tb because the server it needs cannot be had (reason), or fails it
// when the environment variable require is set (IDEM_REQUIRE_POSTGRES, say): a run that
// must include the test cannot leave it out unseen.
func Unavailable(tb testing.TB, require string, reason error) {
	tb.Helper()
	if os.Getenv(require) != "" {
		tb.Fatalf("%v (%s is set: the test may not skip)", reason, require)
		return
	}
	tb.Skipf("skipped: %v", reason)
}

// Await calls ready every interval until it returns nil, and returns nil then: a server
// started as p accepting connections, say. It gives up with an error when p exits first
// (wrapping how it exited), or when ctx ends or timeout passes (wrapping ready's last
// error).
func Await(ctx context.Context, p *Proc, timeout, interval time.Duration, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited before it was ready: %w", cmp.Or(p.Err(), errors.New("exit status 0")))
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
