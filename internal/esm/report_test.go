package esm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/esm"
)

// TestReportCheckFindsViolations: Check fails a log in which the checkpoint passed a
// record that was neither finished nor discarded, or one that settled a record twice.
func TestReportCheckFindsViolations(t *testing.T) {
	t.Parallel()
	inv := func(records []string, done int, checkpoint string) esm.Invocation {
		return esm.Invocation{Shard: "s", Records: records, Done: done, Checkpoint: checkpoint}
	}
	cases := []struct {
		name   string
		report esm.Report
		ok     bool
	}{
		{"finished in two invocations", esm.Report{
			Invocations: []esm.Invocation{inv([]string{"1", "2", "3"}, 1, "1"), inv([]string{"2", "3"}, 2, "3")},
			Checkpoints: map[string]string{"s": "3"},
		}, true},
		{"one discarded", esm.Report{
			Invocations: []esm.Invocation{inv([]string{"1", "2"}, 0, ""), inv([]string{"1", "2"}, 0, "2")},
			Discarded:   []esm.Discard{{Shard: "s", Records: []string{"1", "2"}}},
			Checkpoints: map[string]string{"s": "2"},
		}, true},
		{"failed record passed", esm.Report{
			Invocations: []esm.Invocation{inv([]string{"1", "2", "3"}, 1, "1"), inv([]string{"3"}, 1, "3")},
			Checkpoints: map[string]string{"s": "3"},
		}, false},
		{"checkpoint beyond the last settled", esm.Report{
			Invocations: []esm.Invocation{inv([]string{"1", "2"}, 2, "2")},
			Checkpoints: map[string]string{"s": "9"},
		}, false},
		{"settled twice", esm.Report{
			Invocations: []esm.Invocation{inv([]string{"1", "2"}, 2, "2"), inv([]string{"2"}, 1, "2")},
			Checkpoints: map[string]string{"s": "2"},
		}, false},
		{"delivered and left unsettled", esm.Report{
			Invocations: []esm.Invocation{inv([]string{"1", "2"}, 1, "1")},
			Checkpoints: map[string]string{"s": "1"},
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.report.Check()
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestSequenceLess(t *testing.T) {
	t.Parallel()
	assert.True(t, esm.SequenceLess("000000000000000000009", "10"))
	assert.True(t, esm.SequenceLess("49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899"))
	assert.False(t, esm.SequenceLess("0010", "10"))
	assert.False(t, esm.SequenceLess("11", "9"))
}
