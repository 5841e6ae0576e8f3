package idem

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idem/idemstore"
)

// Codec encodes handler results for storage and decodes them for replay.
type Codec interface {
	// Name identifies the encoding in the record (for example "json"). It must not
	// contain '+'.
	Name() string
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, a non-nil pointer.
	Unmarshal(data []byte, v any) error
}

// JSONCodec encodes results with encoding/json. It is the default [Codec].
type JSONCodec struct{}

// Name returns "json".
func (JSONCodec) Name() string { return "json" }

// Marshal encodes v as JSON.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes JSON data into v. An object member that v has no field for is an error,
// not a silently dropped value: a stored result that does not fit the type it is replayed
// into (another operation's record, or a result type that lost a field since) must never
// decode into a zero value.
func (JSONCodec) Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("json: data after the stored value")
	}
	return nil
}

// encodeResult encodes v with the codec, compressing above the threshold. It returns
// EncodingNone and no data when the result does not fit maxResult. A result longer than
// maxInflated is never compressed, since no replay would inflate it: it is stored as is if
// it fits, and so almost always without its body.
func (c *config) encodeResult(v any) (data []byte, enc string, err error) {
	data, err = c.codec.Marshal(v)
	if err != nil {
		return nil, idemstore.EncodingNone, err
	}
	enc = c.codec.Name()
	if len(data) > c.compressAbove && len(data) <= maxInflated {
		var buf bytes.Buffer
		buf.Grow(len(data) / 4)
		// A gzip writer holds about a megabyte of compressor state: reuse them, or every
		// compressed result would pay for allocating and clearing one.
		zw, _ := c.gzipWriters.Get().(*gzip.Writer)
		if zw == nil {
			zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		} else {
			zw.Reset(&buf)
		}
		_, err := zw.Write(data)
		if err == nil {
			err = zw.Close()
		}
		c.gzipWriters.Put(zw)
		if err != nil {
			return nil, idemstore.EncodingNone, err
		}
		if buf.Len() < len(data) {
			data, enc = buf.Bytes(), enc+idemstore.GzipSuffix
		}
	}
	if len(data) > c.maxResult {
		return nil, idemstore.EncodingNone, nil
	}
	return data, enc, nil
}

// decodeResult decodes a completed record's data into out.
func (c *config) decodeResult(rec *idemstore.Record, out any) error {
	if rec.Version > idemstore.SchemaVersion || rec.Version < 0 {
		return fmt.Errorf("%w: schema version %d", ErrIncompatibleRecord, rec.Version)
	}
	enc := rec.Encoding
	if enc == "" && rec.Version == 0 {
		enc = "json" // as the Powertools utilities write it
	}
	if enc == idemstore.EncodingNone {
		return ErrResultNotStored
	}
	data := rec.Data
	name, gz := strings.CutSuffix(enc, idemstore.GzipSuffix)
	if name != c.codec.Name() {
		return fmt.Errorf("%w: encoding %q, codec %q", ErrIncompatibleRecord, enc, c.codec.Name())
	}
	if gz {
		var err error
		if data, err = c.inflate(data); err != nil {
			return fmt.Errorf("%w: %w", ErrIncompatibleRecord, err)
		}
	}
	if err := c.codec.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %w", ErrIncompatibleRecord, err)
	}
	return nil
}

// maxInflated bounds what a stored result may inflate to: a hostile or corrupt record must
// not exhaust memory. DynamoDB items are at most 400 KB. The writer applies the same bound,
// so that every compressed result it stores can be replayed.
const maxInflated = 64 << 20

// inflate decompresses a gzipped result. Its readers are reused: each holds about 40 KB of
// decompressor state that a replay would otherwise allocate and clear.
func (c *config) inflate(data []byte) ([]byte, error) {
	zr, _ := c.gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(data))
	} else {
		err = zr.Reset(bytes.NewReader(data))
	}
	if err != nil {
		return nil, err
	}
	defer c.gzipReaders.Put(zr)
	var out bytes.Buffer
	out.Grow(inflatedSizeHint(data))
	// One byte past the limit tells a result at the limit from one cut off by it.
	n, err := out.ReadFrom(io.LimitReader(zr, maxInflated+1))
	if err != nil {
		return nil, err
	}
	if n > maxInflated {
		return nil, fmt.Errorf("gzip result inflates beyond %d bytes", maxInflated)
	}
	return out.Bytes(), nil
}

// inflatedSizeHint is the size gzip's trailer gives for the uncompressed data (modulo
// 2^32), bounded by what deflate can produce from data and by maxInflated, so that a
// corrupt trailer cannot make a replay allocate more than its result could need. A zero
// or wrong hint only costs the buffer's growth.
func inflatedSizeHint(data []byte) int {
	if len(data) < 18 { // the smallest gzip member: 10-byte header, 8-byte trailer
		return 0
	}
	isize := int(binary.LittleEndian.Uint32(data[len(data)-4:]))
	// bytes.Buffer.ReadFrom wants room for one more read at the end: 512 bytes.
	return min(isize, 1032*len(data), maxInflated) + 512
}

// valuePrefix begins the stored form of a [CheckpointValue]:
//
//	idem:cp1 <codec name, quoted> <step, quoted> text <the codec's output>
//	idem:cp1 <codec name, quoted> <step, quoted> base64 <the codec's output in base64>
//
// for example idem:cp1 "json" "reserved" text {"id":"r-1"}. Quoted is Go's strconv.Quote:
// valid UTF-8 without NUL, whatever the name or step, and read back exactly. The codec's
// output is kept as text when it is valid UTF-8 without NUL (JSON always is, readable in
// the record), else in base64 (standard, padded). So every form is a checkpoint every
// store keeps exactly. [Checkpoint] refuses a string with this prefix: no plain
// checkpoint reads back as a value.
const valuePrefix = "idem:cp1 "

// The forms of a checkpoint value's data.
const (
	formText   = "text "
	formBase64 = "base64 "
)

// checkpointForm is a parsed [CheckpointValue]'s stored form.
type checkpointForm struct {
	codec, step string
	data        []byte
}

// encodeCheckpoint returns the stored form of step and v, encoded with the codec. It
// refuses, with [ErrInvalidCheckpoint], a value the codec cannot encode and a form longer
// than [MaxCheckpointLen].
func (c *config) encodeCheckpoint(step string, v any) (string, error) {
	data, err := c.codec.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: step %q: value does not encode: %w", ErrInvalidCheckpoint, step, err)
	}
	var b strings.Builder
	b.WriteString(valuePrefix)
	b.WriteString(strconv.Quote(c.codec.Name()))
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(step))
	b.WriteByte(' ')
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		b.WriteString(formText)
		b.Write(data)
	} else {
		b.WriteString(formBase64)
		b.WriteString(base64.StdEncoding.EncodeToString(data))
	}
	if b.Len() > MaxCheckpointLen {
		return "", fmt.Errorf("%w: step %q and its value (%d bytes encoded) take %d bytes stored, more than %d",
			ErrInvalidCheckpoint, step, len(data), b.Len(), MaxCheckpointLen)
	}
	return b.String(), nil
}

// parseCheckpoint parses the stored form of a [CheckpointValue]. It fails for a plain
// checkpoint and for a damaged form.
func parseCheckpoint(s string) (checkpointForm, error) {
	var f checkpointForm
	rest, ok := strings.CutPrefix(s, valuePrefix)
	if !ok {
		return f, errors.New("not a checkpoint value")
	}
	var err error
	if f.codec, rest, err = cutQuoted(rest); err != nil {
		return f, fmt.Errorf("checkpoint value: codec: %w", err)
	}
	if f.step, rest, err = cutQuoted(rest); err != nil {
		return f, fmt.Errorf("checkpoint value: step: %w", err)
	}
	if fault := checkpointFault(f.step); fault != "" {
		return f, fmt.Errorf("checkpoint value: step: %s", fault)
	}
	if text, ok := strings.CutPrefix(rest, formText); ok {
		f.data = []byte(text)
		return f, nil
	}
	if b64, ok := strings.CutPrefix(rest, formBase64); ok {
		if f.data, err = base64.StdEncoding.Strict().DecodeString(b64); err != nil {
			return f, fmt.Errorf("checkpoint value: %w", err)
		}
		return f, nil
	}
	return f, errors.New("checkpoint value: no text or base64 data")
}

// cutQuoted cuts a double-quoted Go string and the space after it off s, and returns the
// string unquoted and the rest.
func cutQuoted(s string) (unquoted, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", errors.New("not quoted")
	}
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	rest, ok := strings.CutPrefix(s[len(q):], " ")
	if !ok {
		return "", "", errors.New("no space after the quoted string")
	}
	unquoted, err = strconv.Unquote(q)
	return unquoted, rest, err
}

// decodeCheckpoint decodes a checkpoint value's data into out with the codec, which must
// be the one that encoded it.
func (c *config) decodeCheckpoint(f checkpointForm, out any) error {
	if f.codec != c.codec.Name() {
		return fmt.Errorf("value encoded with codec %q, the guard's is %q", f.codec, c.codec.Name())
	}
	return c.codec.Unmarshal(f.data, out)
}
