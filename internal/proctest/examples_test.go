package proctest_test

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/proctest"
)

// TestLeaveOutExamples: ^Example joins -skip, and a pattern given on the command line stays.
func TestLeaveOutExamples(t *testing.T) {
	f := flag.Lookup("test.skip")
	require.NotNil(t, f, "the test binary has -test.skip")
	old := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(old) })
	for _, tc := range []struct{ name, given, want string }{
		{"NoPattern", "", "^Example"},
		{"GivenPattern", "TestSlow", "TestSlow|^Example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, f.Value.Set(tc.given))
			proctest.LeaveOutExamples()
			assert.Equal(t, tc.want, f.Value.String())
		})
	}
}
