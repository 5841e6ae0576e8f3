package idem

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gzipped(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	require.NoError(t, err)
	_, err = zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestInflateReusesReaders inflates results of several sizes one after another through
// the same pool, so that each reader is reset between different inputs, including ones
// whose trailer lies about their size or that are not gzip at all.
func TestInflateReusesReaders(t *testing.T) {
	t.Parallel()
	c := &config{gzipReaders: new(sync.Pool)}
	inputs := [][]byte{
		[]byte(`{"ok":true}`),
		[]byte(strings.Repeat(`{"sku":"SKU-000123","quantity":3},`, 2000)),
		{},
		[]byte(strings.Repeat("x", 300<<10)),
	}
	for round := range 3 {
		for i, in := range inputs {
			out, err := c.inflate(gzipped(t, in))
			require.NoError(t, err, "round %d input %d", round, i)
			assert.Equal(t, in, out, "round %d input %d", round, i)
		}
		// A trailer that claims 4 GiB: the hint is bounded, the data still right.
		lying := gzipped(t, inputs[1])
		binary.LittleEndian.PutUint32(lying[len(lying)-4:], 1<<32-1)
		assert.LessOrEqual(t, inflatedSizeHint(lying), 1032*len(lying)+512)
		_, err := c.inflate(lying)
		require.Error(t, err, "gzip checks the size in the trailer")

		_, err = c.inflate([]byte("not gzip"))
		require.Error(t, err)
		truncated := gzipped(t, inputs[3])
		_, err = c.inflate(truncated[:len(truncated)/2])
		require.Error(t, err)
	}
}

// TestInflateLimit refuses a result that inflates beyond maxInflated, and accepts one
// that inflates to exactly that.
func TestInflateLimit(t *testing.T) {
	t.Parallel()
	c := &config{gzipReaders: new(sync.Pool)}
	zeros := make([]byte, maxInflated+1)
	_, err := c.inflate(gzipped(t, zeros))
	require.ErrorContains(t, err, "inflates beyond")
	out, err := c.inflate(gzipped(t, zeros[:maxInflated]))
	require.NoError(t, err)
	assert.Len(t, out, maxInflated)
}
