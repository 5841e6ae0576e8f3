package idemstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// TestErrorsAreDistinct: a store's error, wrapped as the store likes, matches its own
// sentinel and no other, so the guard's errors.Is branches never confuse two outcomes.
func TestErrorsAreDistinct(t *testing.T) {
	t.Parallel()
	sentinels := map[string]error{
		"ErrLeaseLost":          idemstore.ErrLeaseLost,
		"ErrTooLarge":           idemstore.ErrTooLarge,
		"ErrConditionFailed":    idemstore.ErrConditionFailed,
		"ErrNotCommitted":       idemstore.ErrNotCommitted,
		"ErrIncompatibleRecord": idemstore.ErrIncompatibleRecord,
		"ErrInvalidAttach":      idemstore.ErrInvalidAttach,
	}
	for name, sentinel := range sentinels {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wrapped := fmt.Errorf("mystore: complete: %w", sentinel)
			for other, o := range sentinels {
				assert.Equal(t, other == name, errors.Is(wrapped, o), "errors.Is(%s, %s)", name, other)
			}
		})
	}
}

// TestIdemReexportsTheSameValues: the errors package idem re-exports are the same values,
// so errors.Is matches a store's error under either name.
func TestIdemReexportsTheSameValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		store, reexport error
	}{
		{"ErrLeaseLost", idemstore.ErrLeaseLost, idem.ErrLeaseLost},
		{"ErrConditionFailed", idemstore.ErrConditionFailed, idem.ErrConditionFailed},
		{"ErrIncompatibleRecord", idemstore.ErrIncompatibleRecord, idem.ErrIncompatibleRecord},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.ErrorIs(t, fmt.Errorf("mystore: %w", tc.store), tc.reexport)
			assert.ErrorIs(t, fmt.Errorf("mystore: %w", tc.reexport), tc.store)
		})
	}
}
