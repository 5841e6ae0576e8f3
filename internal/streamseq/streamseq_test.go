package streamseq_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/streamseq"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{"shorter is smaller", "99", "100", -1},
		{"same length by digits", "4421584500000000017450439092", "4421584500000000017450439091", 1},
		{"leading zeros do not count", "000000000000000000100", "100", 0},
		{"padded against unpadded", "000000000000000000099", "100", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, streamseq.Compare(tc.a, tc.b))
			assert.Equal(t, tc.want < 0, streamseq.Less(tc.a, tc.b))
		})
	}
}
