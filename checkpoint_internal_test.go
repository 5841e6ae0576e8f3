package idem

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedCodec encodes every value as data: a codec whose output is any bytes at all.
type fixedCodec struct {
	name string
	data []byte
}

func (c fixedCodec) Name() string                { return c.name }
func (c fixedCodec) Marshal(any) ([]byte, error) { return c.data, nil }
func (c fixedCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("fixed: not a *[]byte")
	}
	*p = bytes.Clone(data)
	return nil
}

// TestCheckpointValueForms: the codec's output is kept as text when every store keeps it
// as it is, else in base64; both read back exactly.
func TestCheckpointValueForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, step string
		data       []byte
		want       string
	}{
		{"JSON", "reserved", []byte(`{"id":"r-1"}`), `idem:cp1 "json" "reserved" text {"id":"r-1"}`},
		{"Empty", "reserved", nil, `idem:cp1 "json" "reserved" text `},
		{"NUL", "reserved", []byte("a\x00b"), `idem:cp1 "json" "reserved" base64 YQBi`},
		{"InvalidUTF8", "reserved", []byte{0xff, 'a'}, `idem:cp1 "json" "reserved" base64 /2E=`},
		{"QuotedStep", "say \"hi\" ✓\n", []byte("1"), `idem:cp1 "json" "say \"hi\" ✓\n" text 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config{codec: fixedCodec{"json", tc.data}}
			stored, err := c.encodeCheckpoint(tc.step, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, stored)
			f, err := parseCheckpoint(stored)
			require.NoError(t, err)
			assert.Equal(t, checkpointForm{codec: "json", step: tc.step, data: tc.data}, nilIfEmpty(f))
		})
	}
}

func nilIfEmpty(f checkpointForm) checkpointForm {
	if len(f.data) == 0 {
		f.data = nil
	}
	return f
}

// TestDamagedCheckpointValue: a checkpoint in the stored form of a value that does not
// parse (a damaged record) is an error wrapping ErrIncompatibleRecord, with the whole
// checkpoint as step; LastCheckpoint returns it as it is.
func TestDamagedCheckpointValue(t *testing.T) {
	t.Parallel()
	damaged := map[string]string{
		"NoCodec":       "idem:cp1 ",
		"CodecUnquoted": `idem:cp1 json "reserved" text 1`,
		"StepUnclosed":  `idem:cp1 "json" "reserved text 1`,
		"NoSpace":       `idem:cp1 "json" "reserved"text 1`,
		"EmptyStep":     `idem:cp1 "json" "" text 1`,
		"StepWithNUL":   `idem:cp1 "json" "a\x00" text 1`,
		"NoForm":        `idem:cp1 "json" "reserved" 1`,
		"BadBase64":     `idem:cp1 "json" "reserved" base64 !!`,
		"Backquoted":    "idem:cp1 `json` \"reserved\" text 1",
	}
	for name, cp := range damaged {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := &Guard{cfg: config{codec: JSONCodec{}}}
			ctx := withLease(context.Background(), &lease{g: g, checkpoint: cp})
			step, v, ok, err := LastCheckpointValue[int](ctx)
			require.ErrorIs(t, err, ErrIncompatibleRecord)
			assert.Equal(t, cp, step)
			assert.Zero(t, v)
			assert.False(t, ok)
			assert.Equal(t, cp, LastCheckpoint(ctx))
		})
	}
}

// FuzzCheckpointValue: whatever the step, codec name and codec output, the stored form is
// refused for its length alone or is a checkpoint every store keeps exactly (only its
// prefix sets it apart from one Checkpoint takes), and it parses back to exactly what was
// encoded.
func FuzzCheckpointValue(f *testing.F) {
	f.Add("reserved", "json", []byte(`{"id":"r-1"}`))
	f.Add("say \"hi\"\n", "gob", []byte{0, 0xff, 0xfe})
	f.Add("✓", "a b\"c", []byte(strings.Repeat("x", 1000)))
	f.Fuzz(func(t *testing.T, step, codec string, data []byte) {
		if checkpointFault(step) != "" || codec == "" {
			return // refused before encoding
		}
		c := config{codec: fixedCodec{codec, data}}
		stored, err := c.encodeCheckpoint(step, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalidCheckpoint) || len(stored) != 0 {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		want := "begins with \"idem:cp1 \", the stored form of a CheckpointValue"
		if fault := checkpointFault(stored); fault != want {
			t.Fatalf("stored form %q: %s", stored, fault)
		}
		got, err := parseCheckpoint(stored)
		if err != nil {
			t.Fatalf("parse %q: %v", stored, err)
		}
		if got.codec != codec || got.step != step || !bytes.Equal(got.data, data) {
			t.Fatalf("parsed %q as %+v", stored, got)
		}
	})
}

// FuzzParseCheckpoint: any stored checkpoint parses or fails without panicking, and a
// step parsed is one Checkpoint would take.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add(`idem:cp1 "json" "reserved" text {"id":"r-1"}`)
	f.Add(`idem:cp1 "raw" "a\x00" base64 AP8=`)
	f.Add("payment_charged")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseCheckpoint(s)
		if err == nil && checkpointFault(got.step) != "" {
			t.Fatalf("parsed %q with step %q", s, got.step)
		}
	})
}
