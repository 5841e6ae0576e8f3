// Package jsonlines reads output written as one JSON object per line (slog's JSON handler,
// CloudWatch EMF documents) in tests.
package jsonlines

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// Parse returns the objects of out, one per line, and fails tb on a line that is not a
// JSON object.
func Parse(tb testing.TB, out []byte) []map[string]any {
	tb.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			tb.Fatalf("jsonlines: not a JSON object: %v\n%s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("jsonlines: %v", err)
	}
	return lines
}
