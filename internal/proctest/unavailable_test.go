package proctest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/proctest"
)

// outcomeTB records how a test ended, in place of a testing.TB whose Fatalf and Skipf
// would end the calling goroutine.
type outcomeTB struct {
	testing.TB
	fatal, skip string
}

func (o *outcomeTB) Helper()                        {}
func (o *outcomeTB) Fatalf(format string, a ...any) { o.fatal = fmt.Sprintf(format, a...) }
func (o *outcomeTB) Skipf(format string, a ...any)  { o.skip = fmt.Sprintf(format, a...) }

// TestUnavailable: a test whose server cannot be had skips with the reason, and fails
// instead when the run requires the server.
func TestUnavailable(t *testing.T) { // not parallel: environment
	const require = "PROCTEST_REQUIRE_SOMETHING"
	reason := errors.New("no server here")
	for _, tc := range []struct {
		name      string
		env       string
		fatal     bool
		mentioned string
	}{
		{"NotRequired", "", false, "no server here"},
		{"Required", "1", true, require + " is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(require, tc.env)
			o := &outcomeTB{TB: t}
			proctest.Unavailable(o, require, reason)
			if tc.fatal {
				assert.Empty(t, o.skip)
				assert.Contains(t, o.fatal, tc.mentioned)
				assert.Contains(t, o.fatal, "no server here")
				return
			}
			assert.Empty(t, o.fatal)
			assert.Contains(t, o.skip, tc.mentioned)
		})
	}
}
