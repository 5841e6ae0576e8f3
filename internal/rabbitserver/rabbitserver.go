// Package rabbitserver starts the RabbitMQ brokers that rabbitconsumer's tests and the lab's
// benchmark run against: Debian's rabbitmq-server on 127.0.0.1 at a free port, with a node
// name, Erlang cookie, port mapper (epmd) and data directory of its own in a temporary
// directory, stopped by process id. A broker installed system-wide is never touched. It
// needs nothing but the standard library, so the root module can hold it for both.
package rabbitserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/idemkit/idem/internal/proctest"
)

// Script is where Debian's rabbitmq-server package installs the broker's start script
// (/usr/sbin/rabbitmq-server only switches to the rabbitmq user and calls it).
const Script = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// StartTimeout bounds how long a broker may take to accept AMQP connections once started:
// it boots in a few seconds on an idle machine.
const StartTimeout = 2 * time.Minute

// stopGrace is how long a broker may take to stop after SIGTERM before it is killed.
const stopGrace = 30 * time.Second

// Server is one RabbitMQ broker this package started, with its own port mapper.
type Server struct {
	// Addr is the broker's AMQP address, 127.0.0.1:port.
	Addr string
	dir  string
	port int // AMQP
	dist int // Erlang distribution
	epmd int // the port mapper's port
	pm   *proctest.Proc
	proc *proctest.Proc // the running broker; nil when stopped
	log  *bytes.Buffer
}

// Start starts a broker on 127.0.0.1 at a free port, in a new temporary directory that
// holds its data (RABBITMQ_MNESIA_BASE), logs, Erlang cookie ($HOME) and no plugins, with
// a port mapper of its own (ERL_EPMD_PORT). It returns once the broker accepts AMQP
// connections; the user guest, password guest, may connect from 127.0.0.1 (see
// [Server.URL]). Stop it with [Server.Stop].
func Start(ctx context.Context) (*Server, error) {
	if _, err := os.Stat(Script); err != nil {
		return nil, fmt.Errorf("rabbitserver: rabbitmq-server not found (install the Debian package rabbitmq-server; `make deps` does as root): %w", err)
	}
	if _, err := exec.LookPath("epmd"); err != nil {
		return nil, fmt.Errorf("rabbitserver: epmd not found (the Debian package erlang-base brings it): %w", err)
	}
	dir, err := os.MkdirTemp("", "idem-rabbitmq-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	err = proctest.OnFreePort(ctx, 0, func(port int) error {
		if err := s.startEPMD(ctx); err != nil {
			return err
		}
		s.port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if s.dist, err = proctest.PickPort(0); err != nil {
			return err
		}
		if err := s.Restart(ctx); err != nil {
			_ = s.pm.Kill()
			return err
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// URL returns the AMQP URL of the broker's default virtual host, as user guest.
func (s *Server) URL() string { return "amqp://guest:guest@" + s.Addr + "/" }

// startEPMD starts a port mapper on 127.0.0.1 at a free port, in the foreground, so that
// it is stopped by its process id (the broker would otherwise start one as a daemon that
// outlives it).
func (s *Server) startEPMD(ctx context.Context) error {
	return proctest.OnFreePort(ctx, 0, func(port int) error {
		cmd := exec.Command("epmd", "-port", strconv.Itoa(port), "-address", "127.0.0.1")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		proc, err := proctest.Launch(cmd)
		if err != nil {
			return fmt.Errorf("rabbitserver: start epmd: %w", err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for range 100 {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = conn.Close()
				s.pm, s.epmd = proc, port
				return nil
			}
			select {
			case <-proc.Done():
				return fmt.Errorf("rabbitserver: epmd on port %d exited", port)
			case <-time.After(20 * time.Millisecond):
			}
		}
		_ = proc.Kill()
		return fmt.Errorf("rabbitserver: epmd does not listen on port %d", port)
	})
}

// env returns the broker's whole environment: nothing is inherited but PATH, so no
// system-wide setting (/etc/rabbitmq) applies.
func (s *Server) env() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.dir, // the Erlang cookie is written there
		"ERL_EPMD_PORT=" + strconv.Itoa(s.epmd),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_NODENAME=idem-" + strconv.Itoa(s.port) + "@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(s.port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(s.dist),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(s.dir, "log"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(s.dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(s.dir, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(s.dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(s.dir, "enabled_plugins"),
		"RABBITMQ_PLUGINS_EXPAND_DIR=" + filepath.Join(s.dir, "plugins"),
		// Replace the script's shell by the Erlang VM (as under systemd), so the process
		// started is the broker itself, and SIGTERM stops it gracefully.
		"RUNNING_UNDER_SYSTEMD=true",
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}",
	}
}

// Restart starts the broker after [Server.Shutdown] or [Server.Kill] on the same ports,
// with the same data directory: durable queues and their persistent messages are back.
func (s *Server) Restart(ctx context.Context) error {
	if s.proc != nil {
		return errors.New("rabbitserver: the broker is running")
	}
	s.log = &bytes.Buffer{}
	cmd := exec.Command(Script)
	cmd.Dir, cmd.Env = s.dir, s.env()
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// The kernel kills the broker if the test binary dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	proc, err := proctest.Launch(cmd)
	if err != nil {
		return fmt.Errorf("rabbitserver: start rabbitmq-server: %w", err)
	}
	if err := proctest.Await(ctx, proc, StartTimeout, 100*time.Millisecond, func() error { return handshake(s.Addr) }); err != nil {
		_ = proc.Kill()
		return fmt.Errorf("rabbitserver: rabbitmq-server on %s: %w\n%s", s.Addr, err, s.log)
	}
	s.proc = proc
	return nil
}

// handshake sends the AMQP 0-9-1 protocol header to addr and reads the first frame's
// header: nil when it is a method frame (Connection.Start).
func handshake(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return err
	}
	var frame [7]byte
	if _, err := io.ReadFull(conn, frame[:]); err != nil {
		return err
	}
	if frame[0] != 1 {
		return fmt.Errorf("frame type %d, want a method frame", frame[0])
	}
	return nil
}

// PID returns the broker's process id, or 0 when it is not running.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Shutdown stops the broker gracefully (SIGTERM, by process id), killing it after 30
// seconds, and keeps its data for [Server.Restart].
func (s *Server) Shutdown() error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.Stop(syscall.SIGTERM, stopGrace)
	s.proc = nil
	if err != nil {
		return fmt.Errorf("rabbitserver: %w", err)
	}
	return nil
}

// Kill kills the broker with SIGKILL, by process id: a crash. Its data stays for
// [Server.Restart].
func (s *Server) Kill() error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.Kill()
	s.proc = nil
	if err != nil {
		return fmt.Errorf("rabbitserver: %w", err)
	}
	return nil
}

// Stop stops the broker ([Server.Shutdown]) and its port mapper, and removes its
// directory.
func (s *Server) Stop() error {
	err := s.Shutdown()
	if s.pm != nil {
		err = errors.Join(err, s.pm.Kill())
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Dir returns the broker's temporary directory.
func (s *Server) Dir() string { return s.dir }
