// Package redisserver starts the Redis servers that redisstore's tests and the lab's
// benchmark run against: redis-server on 127.0.0.1 at a free port, without persistence
// unless asked, stopped by process id. It needs nothing but the standard library, so the
// root module can hold it for both.
package redisserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idem/internal/proctest"
)

// StartTimeout bounds how long a server may take to answer PING after it started.
const StartTimeout = 20 * time.Second

// Server is one redis-server process this package started.
type Server struct {
	// Addr is the server's address, 127.0.0.1:port.
	Addr string
	dir  string
	args []string
	proc *proctest.Proc // the running process; nil once killed
	log  *bytes.Buffer
}

// Start starts redis-server on 127.0.0.1 at a free port, in a new temporary directory,
// without persistence (no RDB snapshots, no append-only file), with extra appended to its
// command line ("--appendonly", "yes", for example). It returns once the server answers
// PING. Stop it with [Server.Stop].
func Start(ctx context.Context, extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redisserver: redis-server not found (install the Debian package redis-server, `make deps` does as root, or set REDIS_URL): %w", err)
	}
	dir, err := os.MkdirTemp("", "idem-redis-")
	if err != nil {
		return nil, err
	}
	var s *Server
	// A cluster node's bus port, its port + 10000, must exist too.
	err = proctest.OnFreePort(ctx, 65535-10000, func(port int) error {
		args := append([]string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
		}, extra...)
		s = &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, args: append([]string{bin}, args...)}
		return s.start(ctx)
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// start runs the server's command and waits until it answers PING.
func (s *Server) start(ctx context.Context) error {
	s.log = &bytes.Buffer{}
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// The kernel kills the server if the test binary dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	proc, err := proctest.Launch(cmd)
	if err != nil {
		return fmt.Errorf("redisserver: start redis-server: %w", err)
	}
	if err := proctest.Await(ctx, proc, StartTimeout, 20*time.Millisecond, func() error { return ping(s.Addr) }); err != nil {
		_ = proc.Kill()
		return fmt.Errorf("redisserver: redis-server on %s: %w\n%s", s.Addr, err, s.log)
	}
	s.proc = proc
	return nil
}

// ping sends PING to addr as an inline command and reads the answer: nil when it is PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// PID returns the process id of the running server, or 0 when it is not running.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Kill kills the server with SIGKILL, by process id, and waits until it is gone: a crash,
// with no chance to save anything beyond what its persistence settings already wrote.
func (s *Server) Kill() error {
	if s.proc == nil {
		return nil
	}
	if err := s.proc.Kill(); err != nil {
		return fmt.Errorf("redisserver: redis-server: %w", err)
	}
	s.proc = nil
	return nil
}

// Restart starts the server again after [Server.Kill], on the same port, in the same
// directory, with the same settings (so with an append-only file it reloads its data).
func (s *Server) Restart(ctx context.Context) error {
	var err error
	for range 50 { // the killed server's port may take a moment to be free again
		if err = s.start(ctx); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() error {
	err := s.Kill()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Dir returns the server's working directory.
func (s *Server) Dir() string { return s.dir }
