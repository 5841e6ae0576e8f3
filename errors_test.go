package idem_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func TestTypedErrors(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection reset")
	tests := []struct {
		name     string
		err      error
		sentinel error
		others   []error
	}{
		{name: "InProgress", err: &idem.InProgressError{RetryAfter: 3 * time.Second}, sentinel: idem.ErrInProgress,
			others: []error{idem.ErrStore, idem.ErrFailed, idem.ErrLeaseLost}},
		{name: "Store", err: &idem.StoreError{Op: "claim", Err: cause}, sentinel: idem.ErrStore,
			others: []error{idem.ErrInProgress, idem.ErrFailed, idem.ErrLeaseLost}},
		{name: "Failed", err: &idem.FailedError{Message: "card declined"}, sentinel: idem.ErrFailed,
			others: []error{idem.ErrInProgress, idem.ErrStore}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wrapped := fmt.Errorf("handler: %w", tc.err)
			require.ErrorIs(t, wrapped, tc.sentinel)
			for _, o := range tc.others {
				assert.NotErrorIs(t, wrapped, o)
			}
			assert.Contains(t, tc.err.Error(), "idem: ")
		})
	}
	var se *idem.StoreError
	require.ErrorAs(t, fmt.Errorf("x: %w", &idem.StoreError{Op: "complete", Err: cause}), &se)
	assert.Equal(t, "complete", se.Op)
	require.ErrorIs(t, se, cause, "the cause stays reachable")
	var ip *idem.InProgressError
	require.ErrorAs(t, fmt.Errorf("x: %w", &idem.InProgressError{RetryAfter: 3 * time.Second}), &ip)
	assert.Equal(t, 3*time.Second, ip.RetryAfter)
}
