package rabbitserver_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/internal/rabbitserver"
)

// TestStartRestartStop starts a broker, restarts it on the same port after a graceful
// stop and after a crash, and stops it: its processes are gone and its directory removed.
func TestStartRestartStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := rabbitserver.Start(ctx)
	if err != nil {
		proctest.Unavailable(t, "IDEM_REQUIRE_RABBITMQ", err)
	}
	pid := s.PID()
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	second := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{pid, second} {
		if err := syscall.Kill(p, 0); err == nil {
			t.Errorf("pid %d still runs after Stop", p)
		}
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want it removed", s.Dir(), err)
	}
}
