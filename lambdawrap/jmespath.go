package lambdawrap

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/jmespath-community/go-jmespath"
)

// maxInflated bounds what powertools_base64_gzip inflates, so a hostile event cannot make
// a key function allocate without limit. Lambda payloads are at most 6 MB.
const maxInflated = 16 << 20

// KeyFromJMESPath returns a key function that evaluates the JMESPath expression expr over
// the event's JSON encoding, for parity with the Powertools utilities' event_key_jmespath.
// A selected string is the key as it is; any other value is the key in its compact JSON
// encoding (so "[order_id, customer_id]" keys on both). As in the Powertools utilities, a
// selected null, empty string, empty object, empty list or list of nulls means the event
// has no key: [Wrap] refuses it with [idem.ErrMissingKey] (or runs it unguarded, see
// [WithKeyRequired]), so that events selecting the same empty value never share one
// record. Zero and false are keys.
//
// Besides the standard functions, the expression may use the Powertools ones:
// powertools_json(s) decodes a JSON string (for example an API Gateway body),
// powertools_base64(s) decodes base64, and powertools_base64_gzip(s) decodes base64 and
// inflates gzip. Integers too large for a float64 keep their exact digits. It returns an error if expr does not
// compile. The returned function is safe for concurrent use.
func KeyFromJMESPath[In any](expr string) (KeyFunc[In], error) {
	q, err := compileJMESPath(expr)
	if err != nil {
		return nil, fmt.Errorf("lambdawrap: KeyFromJMESPath: %w", err)
	}
	return func(in In) (string, error) {
		v, err := q.search(in)
		if err != nil || isAbsent(v) {
			return "", err
		}
		if s, ok := v.(string); ok {
			return s, nil
		}
		b, err := json.Marshal(v)
		return string(b), err
	}, nil
}

// jmespathQuery is a compiled expression with the Powertools functions.
type jmespathQuery struct {
	expr string
	q    jmespath.JMESPath
}

func compileJMESPath(expr string) (*jmespathQuery, error) {
	q, err := jmespath.Compile(expr, powertoolsFunctions()...)
	if err != nil {
		return nil, err
	}
	return &jmespathQuery{expr: expr, q: q}, nil
}

// search evaluates the expression over v's JSON encoding.
func (j *jmespathQuery) search(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("lambdawrap: jmespath %q: %w", j.expr, err)
	}
	doc, err := decodeJSON(b)
	if err != nil {
		return nil, fmt.Errorf("lambdawrap: jmespath %q: %w", j.expr, err)
	}
	out, err := j.q.Search(toSearchable(doc))
	if err != nil {
		return nil, fmt.Errorf("lambdawrap: jmespath %q: %w", j.expr, err)
	}
	return out, nil
}

// fingerprint is the canonical JSON of what the expression selects.
func (j *jmespathQuery) fingerprint(v any) ([]byte, error) {
	out, err := j.search(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out) // encoding/json sorts map keys: the encoding is canonical
}

// decodeJSON decodes b with json.Number for numbers, so large integers keep their digits.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// maxExactInt bounds the integers a float64 holds exactly (beyond it, 2^53+1 reads as 2^53).
const maxExactInt = 1 << 53

// toSearchable turns the json.Numbers of a decoded document into float64, which is what
// JMESPath functions and comparisons work on, except integers too large for a float64 to
// hold exactly: those keep their digits, so ids used as keys never collide.
func toSearchable(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil || (!strings.ContainsAny(string(v), ".eE") && (f >= maxExactInt || f <= -maxExactInt)) {
			return v
		}
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = toSearchable(e)
		}
	case []any:
		for i, e := range v {
			v[i] = toSearchable(e)
		}
	}
	return v
}

// isAbsent reports whether a selected value is no key, as the Powertools utilities decide:
// null, "", {}, and a list of nulls (the empty list included). Zero and false are keys.
func isAbsent(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case map[string]any:
		return len(v) == 0
	case []any:
		for _, e := range v {
			if e != nil {
				return false
			}
		}
		return true
	}
	return false
}

// powertoolsFunctions are the JMESPath functions the Powertools utilities add, so that
// expressions written for them work here unchanged.
func powertoolsFunctions() []jmespath.FunctionEntry {
	str := []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpString}}}
	return []jmespath.FunctionEntry{
		{Name: "powertools_json", Arguments: str, Handler: func(args []any) (any, error) {
			v, err := decodeJSON([]byte(args[0].(string)))
			return toSearchable(v), err
		}},
		{Name: "powertools_base64", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			return string(b), err
		}},
		{Name: "powertools_base64_gzip", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, err
			}
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			out, err := io.ReadAll(io.LimitReader(zr, maxInflated+1))
			if err != nil {
				return nil, err
			}
			if len(out) > maxInflated {
				return nil, fmt.Errorf("powertools_base64_gzip: inflates beyond %d bytes", maxInflated)
			}
			return string(out), nil
		}},
	}
}
