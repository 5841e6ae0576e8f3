// Package pgserver starts the PostgreSQL servers that pgstore's tests and the lab's
// benchmark run against: PostgreSQL 15 or newer on 127.0.0.1 at a free port, in a data
// directory of its own, as an unprivileged user when run as root, stopped by process id.
// It needs nothing but the standard library, so the root module can hold it for both.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idem/internal/proctest"
)

// minMajor is the oldest PostgreSQL the store supports: MERGE (release) came in 15.
const minMajor = 15

// Server is a PostgreSQL server started on 127.0.0.1, in a data directory of
// its own, as an unprivileged user when the tests run as root (PostgreSQL refuses to run as
// root). It is stopped by process id.
type Server struct {
	bin  string // directory holding initdb and postgres
	base string // temporary directory holding data/ and server.log
	port int
	cred *syscall.Credential // nil: run as ourselves
	proc *proctest.Proc      // the running postmaster; nil when stopped
}

// Start initialises a fresh data directory and starts a server on a free port of
// 127.0.0.1. It returns an error naming what is missing when PostgreSQL 15 or newer is not
// installed.
func Start(ctx context.Context) (*Server, error) {
	bin, err := Locate()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "idem-pgserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, base: base, cred: cred}
	if cred != nil {
		if err := os.Chown(base, int(cred.Uid), int(cred.Gid)); err != nil {
			s.remove()
			return nil, err
		}
	}
	out, err := s.command(filepath.Join(bin, "initdb"), "-D", s.dataDir(), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("pgserver: initdb: %w\n%s", err, out)
	}
	err = proctest.OnFreePort(ctx, 0, func(port int) error {
		s.port = port
		return s.Restart(ctx)
	})
	if err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// URL returns the connection string of the server's "postgres" database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// PID returns the process id of the running postmaster, or 0 when it is not running.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Restart starts the postmaster on the server's data directory and port, and waits until it
// accepts connections. The server must not be running.
func (s *Server) Restart(ctx context.Context) error {
	if s.proc != nil {
		return errors.New("pgserver: server already running")
	}
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// The child holds its own descriptor of the log; ours is only for starting it.
	defer func() { _ = logf.Close() }()
	// fsync off: a test server's data need not survive the machine, only the process, which
	// the page cache covers (the fault test kills the process, never the machine). Commits
	// stay synchronous, so what a client saw committed is in the WAL when the process dies.
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir(),
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(s.port),
		"-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=64MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if s.proc, err = proctest.Launch(cmd); err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	if err := proctest.Await(ctx, s.proc, 30*time.Second, 50*time.Millisecond, s.accepting); err != nil {
		_ = s.Stop()
		return fmt.Errorf("pgserver: postgres did not come up: %w\n%s", err, s.logTail())
	}
	return nil
}

// accepting reports, as an error, why the server does not accept connections yet: the
// status line of postmaster.pid (its eighth, PostgreSQL 10+) is not "ready", or the port
// does not take a connection.
func (s *Server) accepting() error {
	b, err := os.ReadFile(filepath.Join(s.dataDir(), "postmaster.pid"))
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return errors.New("postmaster.pid: not ready")
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), 2*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// Crash ends the postmaster and its backends at once with SIGQUIT (PostgreSQL's immediate
// shutdown: no checkpoint, crash recovery on the next start), as a crashed server would
// end, and waits for it to exit. Clients see their connections broken.
func (s *Server) Crash() error { return s.signal(syscall.SIGQUIT) }

// Stop shuts the server down with SIGINT (fast shutdown) and waits for it; after 30 s it
// kills it.
func (s *Server) Stop() error { return s.signal(syscall.SIGINT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.proc == nil {
		return nil
	}
	defer func() { s.proc = nil }()
	if err := s.proc.Stop(sig, 30*time.Second); err != nil {
		return fmt.Errorf("pgserver: postgres: %w", err)
	}
	return nil
}

// Close stops the server and removes its data directory.
func (s *Server) Close() error {
	err := s.Stop()
	s.remove()
	return err
}

func (s *Server) dataDir() string { return filepath.Join(s.base, "data") }
func (s *Server) logPath() string { return filepath.Join(s.base, "server.log") }
func (s *Server) remove()         { _ = os.RemoveAll(s.base) }

// logTail returns the end of the server log, for error messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// command returns cmd run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.Dir = s.base
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// credential returns the user to run PostgreSQL as: nil (ourselves) unless we are root,
// else the "postgres" system user if there is one, else "nobody".
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgserver: running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")
}

// Locate finds the directory holding initdb and postgres of PostgreSQL 15 or newer: the
// one on PATH, else the newest /usr/lib/postgresql/<version>/bin (where Debian puts them).
// The error names what is missing.
func Locate() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(debian, func(i, j int) bool { return majorOf(debian[i]) > majorOf(debian[j]) })
	dirs = append(dirs, debian...)
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err != nil {
			continue
		}
		out, err := exec.Command(filepath.Join(d, "postgres"), "--version").Output()
		if err != nil {
			continue
		}
		major := versionMajor(string(out))
		found = append(found, fmt.Sprintf("%s (%d)", d, major))
		if major >= minMajor {
			return d, nil
		}
	}
	if len(found) > 0 {
		return "", fmt.Errorf("pgserver: PostgreSQL %d or newer is needed; found only %s: install the postgresql package (make postgresql does as root)", minMajor, strings.Join(found, ", "))
	}
	return "", errors.New("pgserver: PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin): install the postgresql package (make postgresql does as root), or set DATABASE_URL to a server of yours")
}

var majorRE = regexp.MustCompile(`(\d+)(\.\d+)?`)

// versionMajor reads the major version from `postgres --version` output such as
// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)".
func versionMajor(out string) int {
	if i := strings.Index(out, ")"); i >= 0 {
		out = out[i+1:]
	}
	m := majorRE.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}
