package sqs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqs"
)

// Tests of options.go: each option refuses the values its doc excludes. What the options
// do is shown where it happens: WithConcurrency in batch_test.go, WithKey and
// WithFingerprint in message_test.go and key_test.go, WithDeadlineMargin in
// scenario_test.go, WithBatchClaims in claims_test.go.

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	guard, err := idem.New(memstore.New(), "test")
	require.NoError(t, err)
	tests := []struct {
		name string
		opt  sqs.Option
	}{
		{"WithConcurrency", sqs.WithConcurrency(0)},
		{"WithKey", sqs.WithKey(nil)},
		{"WithFingerprint", sqs.WithFingerprint(nil)},
		{"WithDeadlineMargin", sqs.WithDeadlineMargin(-time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := sqs.New(guard, newRecorder().handle, tc.opt)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Nil(t, h)
			assert.Contains(t, err.Error(), tc.name, "the error names the option")
		})
	}
	t.Run("nil option", func(t *testing.T) {
		t.Parallel()
		h, err := sqs.New(guard, newRecorder().handle, nil)
		require.NoError(t, err, "a nil option is skipped")
		assert.NotNil(t, h)
	})
}
