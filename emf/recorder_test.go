package emf_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/emf"
)

// specTime is the Timestamp of the specification's example.
var specTime = time.UnixMilli(1574109732004)

func fixedClock(t time.Time) emf.Option {
	return emf.WithClock(idem.ClockFunc(func() time.Time { return t }))
}

func newRecorder(t *testing.T, w *bytes.Buffer, opts ...emf.Option) *emf.Recorder {
	t.Helper()
	r, err := emf.New(w, "idem-test", append([]emf.Option{fixedClock(specTime)}, opts...)...)
	require.NoError(t, err)
	return r
}

// The specification's example, written by a Recorder: the same document but for the
// members this package does not write (the request ID, the storage resolution).
func TestSpecificationExample(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r, err := emf.New(&out, "lambda-function-metrics", fixedClock(specTime),
		emf.WithDimension("functionVersion", "$LATEST"))
	require.NoError(t, err)
	require.NoError(t, r.Observe("time", emf.UnitMilliseconds, 100))
	require.NoError(t, r.Flush())

	want := strings.Replace(specExample, `"requestId": "989ffbf8-9ace-4817-a57c-e4dd734019ee"`, `"_end": 0`, 1)
	want = strings.Replace(want, `,
            "StorageResolution": 60`, "", 1)
	want = strings.Replace(want, `,
  "_end": 0`, "", 1)
	assert.JSONEq(t, want, out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "\n"), "one document, one line")
	documents(t, out.Bytes())
}

func TestCountsSumAndObservationsAccumulate(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out, emf.WithDimension("Service", "orders"))
	require.NoError(t, r.Count("Orders", 1))
	require.NoError(t, r.Count("Orders", 2))
	require.NoError(t, r.Observe("Latency", emf.UnitMilliseconds, 1.5))
	require.NoError(t, r.Observe("Latency", emf.UnitMilliseconds, 7))
	require.NoError(t, r.Flush())
	assert.JSONEq(t, `{
		"_aws": {"Timestamp": 1574109732004, "CloudWatchMetrics": [{
			"Namespace": "idem-test", "Dimensions": [["Service"]],
			"Metrics": [{"Name": "Orders", "Unit": "Count"}, {"Name": "Latency", "Unit": "Milliseconds"}]}]},
		"Service": "orders", "Orders": 3, "Latency": [1.5, 7]}`, out.String())

	out.Reset()
	require.NoError(t, r.Flush())
	assert.Empty(t, out.String(), "a flush starts over; nothing recorded writes nothing")
	require.NoError(t, r.Count("Orders", 1))
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 1.0, docs[0]["Orders"], 0)
	assert.NotContains(t, docs[0], "Latency")
}

// CloudWatch drops a document over the specification's limits, so the recorder cuts
// large flushes into several valid documents, losing no value.
func TestFlushKeepsToTheLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		metrics      int // each counted once
		observations int // of one more metric
		docs         int
	}{
		{"100 metrics", 100, 0, 1},
		{"150 metrics", 150, 0, 2},
		{"100 observations", 1, 100, 1},
		{"250 observations", 1, 250, 3},
		{"both", 120, 150, 3}, // M000-M099; M100-M119 with the first 100 observations; the last 50
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			r := newRecorder(t, &out)
			for i := range tc.metrics {
				require.NoError(t, r.Count(fmt.Sprintf("M%03d", i), 1))
			}
			for i := range tc.observations {
				require.NoError(t, r.Observe("Obs", emf.UnitMilliseconds, float64(i)))
			}
			require.NoError(t, r.Flush())
			docs := documents(t, out.Bytes())
			assert.Len(t, docs, tc.docs)

			counts := map[string]int{}
			var obs []float64
			for _, d := range docs {
				for k, v := range d {
					switch {
					case strings.HasPrefix(k, "M"):
						counts[k]++
						assert.InDelta(t, 1.0, v, 0)
					case k == "Obs":
						switch v := v.(type) {
						case float64:
							obs = append(obs, v)
						case []any:
							for _, x := range v {
								obs = append(obs, x.(float64))
							}
						}
					}
				}
			}
			assert.Len(t, counts, tc.metrics, "every metric written")
			for k, n := range counts {
				assert.Equal(t, 1, n, "%s written once", k)
			}
			require.Len(t, obs, tc.observations, "every observation written")
			for i, v := range obs {
				assert.InDelta(t, float64(i), v, 0, "in order")
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tooMany := make([]emf.Option, 0, emf.MaxDimensions+1)
	for i := range emf.MaxDimensions + 1 {
		tooMany = append(tooMany, emf.WithDimension(fmt.Sprintf("D%d", i), "v"))
	}
	tests := []struct {
		name      string
		namespace string
		opts      []emf.Option
		names     string // what the error names
	}{
		{"empty namespace", "", nil, "namespace"},
		{"long namespace", strings.Repeat("n", 256), nil, "namespace"},
		{"empty dimension name", "ns", []emf.Option{emf.WithDimension("", "v")}, "WithDimension"},
		{"colon dimension name", "ns", []emf.Option{emf.WithDimension(":x", "v")}, "WithDimension"},
		{"non-ASCII dimension", "ns", []emf.Option{emf.WithDimension("Service", "bestellungen-ü")}, "WithDimension"},
		{"blank dimension value", "ns", []emf.Option{emf.WithDimension("Service", "  ")}, "WithDimension"},
		{"dimension twice", "ns", []emf.Option{emf.WithDimension("S", "a"), emf.WithDimension("S", "b")}, "WithDimension"},
		{"dimension named as a metric", "ns", []emf.Option{emf.WithDimension(emf.MetricClaims, "a")}, "WithDimension"},
		{"31 dimensions", "ns", tooMany, "WithDimension"},
		{"nil clock", "ns", []emf.Option{emf.WithClock(nil)}, "WithClock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := emf.New(&bytes.Buffer{}, tc.namespace, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), tc.names)
		})
	}
	t.Run("30 dimensions", func(t *testing.T) {
		t.Parallel()
		_, err := emf.New(&bytes.Buffer{}, "ns", tooMany[:emf.MaxDimensions]...)
		assert.NoError(t, err)
	})
}

func TestInvalidMetrics(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out, emf.WithDimension("Service", "orders"))
	require.NoError(t, r.Count("Orders", 1))
	tests := []struct {
		name   string
		record func() error
	}{
		{"empty name", func() error { return r.Count("", 1) }},
		{"long name", func() error { return r.Count(strings.Repeat("m", 256), 1) }},
		{"metadata member", func() error { return r.Count("_aws", 1) }},
		{"dimension name", func() error { return r.Count("Service", 1) }},
		{"NaN", func() error { return r.Observe("Latency", emf.UnitMilliseconds, math.NaN()) }},
		{"infinity", func() error { return r.Observe("Latency", emf.UnitMilliseconds, math.Inf(1)) }},
		{"count observed", func() error { return r.Observe("Orders", emf.UnitCount, 1) }},
		{"count in another unit", func() error { return r.Observe("Orders", emf.UnitMilliseconds, 1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.record(), emf.ErrInvalidMetric)
		})
	}
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 1)
	assert.InDelta(t, 1.0, docs[0]["Orders"], 0, "refused values changed nothing")
}

type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestFlushReturnsTheWritersError(t *testing.T) {
	t.Parallel()
	r, err := emf.New(failingWriter{}, "ns")
	require.NoError(t, err)
	require.NoError(t, r.Count("Orders", 1))
	require.ErrorIs(t, r.Flush(), errDiskFull)
	assert.NoError(t, r.Flush(), "the failed flush's metrics were dropped")
}

func TestConcurrentRecording(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := newRecorder(t, &out)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				assert.NoError(t, r.Count("Orders", 1))
				assert.NoError(t, r.Observe("Latency", emf.UnitMilliseconds, 1))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, r.Flush())
	docs := documents(t, out.Bytes())
	require.Len(t, docs, 4, "400 observations take four documents")
	assert.InDelta(t, 400.0, docs[0]["Orders"], 0)
}
