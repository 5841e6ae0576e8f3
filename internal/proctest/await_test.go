package proctest_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/proctest"
)

// Await returns nil once ready does, an error once the process exits first, and one
// wrapping ready's last error once the timeout passes.
func TestAwait(t *testing.T) {
	ctx := context.Background()
	sleeper, err := proctest.Launch(exec.Command("sleep", "60"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sleeper.Kill() })

	calls := 0
	require.NoError(t, proctest.Await(ctx, sleeper, time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}))
	require.Equal(t, 3, calls)

	notYet := errors.New("not yet")
	err = proctest.Await(ctx, sleeper, 20*time.Millisecond, time.Millisecond, func() error { return notYet })
	require.ErrorIs(t, err, notYet)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	failing, err := proctest.Launch(exec.Command("false"))
	require.NoError(t, err)
	err = proctest.Await(ctx, failing, time.Minute, time.Millisecond, func() error { return notYet })
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
}
