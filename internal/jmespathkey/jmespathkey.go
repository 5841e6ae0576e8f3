// Package jmespathkey evaluates JMESPath expressions over events for key and fingerprint
// functions, with the Powertools utilities' functions (powertools_json, powertools_base64,
// powertools_base64_gzip) and errors that never print a value of the event. lambdawrap,
// kinesis and dynamostream share it.
package jmespathkey

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jmespath-community/go-jmespath"
)

// maxInflated bounds what powertools_base64_gzip inflates, so a hostile event cannot make
// a key function allocate without limit. Lambda payloads are at most 6 MB.
const maxInflated = 16 << 20

// Query is a compiled expression with the Powertools functions. It is safe for concurrent
// use.
type Query struct {
	prefix string
	expr   string
	q      jmespath.JMESPath
}

// Compile compiles expr. prefix, the caller's package name, starts the text of the
// errors of evaluating it.
func Compile(prefix, expr string) (*Query, error) {
	q, err := jmespath.Compile(expr, powertoolsFunctions()...)
	if err != nil {
		return nil, err
	}
	return &Query{prefix: prefix, expr: expr, q: q}, nil
}

// Key evaluates the expression over v's JSON encoding and returns what it selects as a
// key: a string as it is, any other value in its compact JSON encoding, "" for a value
// that is no key (see isAbsent). Its errors never print a value of v.
func (j *Query) Key(v any) (string, error) {
	out, err := j.Search(v)
	if err != nil || isAbsent(out) {
		return "", err
	}
	if s, ok := out.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", j.errorf(fmt.Sprintf("the selected value does not encode as JSON (%T)", err), err)
	}
	return string(b), nil
}

// Search evaluates the expression over v's JSON encoding. Its errors are
// [*jmespathError]s, which never print the event.
func (j *Query) Search(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &jmespathError{prefix: j.prefix, expr: j.expr, what: fmt.Sprintf("the event does not encode as JSON (%T)", err), cause: err}
	}
	doc, err := decodeJSON(b)
	if err != nil {
		return nil, &jmespathError{prefix: j.prefix, expr: j.expr, what: "the event's JSON encoding does not decode", cause: err}
	}
	out, err := j.q.Search(toSearchable(doc))
	if err != nil {
		return nil, evalError(j.prefix, j.expr, err)
	}
	return out, nil
}

// Fingerprint is the canonical JSON of what the expression selects.
func (j *Query) Fingerprint(v any) ([]byte, error) {
	out, err := j.Search(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out) // encoding/json sorts map keys: the encoding is canonical
	if err != nil {
		return nil, &jmespathError{prefix: j.prefix, expr: j.expr, what: fmt.Sprintf("the selected value does not encode as JSON (%T)", err), cause: err}
	}
	return b, nil
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

// MaxExactInt bounds the integers a float64 holds exactly (beyond it, 2^53+1 reads as 2^53).
const MaxExactInt = 1 << 53

// toSearchable turns the json.Numbers of a decoded document into float64s.
// JMESPath functions and comparisons work on those. Integers too large for a float64 to
// hold exactly are the exception: they keep their digits, so ids used as keys never
// collide.
func toSearchable(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil || (!strings.ContainsAny(string(v), ".eE") && (f >= MaxExactInt || f <= -MaxExactInt)) {
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
// expressions written for them work here unchanged. Their errors are [*functionError]s,
// which name the function and the failure, never the argument.
func powertoolsFunctions() []jmespath.FunctionEntry {
	str := []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpString}}}
	return []jmespath.FunctionEntry{
		{Name: "powertools_json", Arguments: str, Handler: func(args []any) (any, error) {
			v, err := decodeJSON([]byte(args[0].(string)))
			if err != nil {
				return nil, &functionError{fn: "powertools_json", what: "the string is not one JSON value", cause: err}
			}
			return toSearchable(v), nil
		}},
		{Name: "powertools_base64", Arguments: str, Handler: func(args []any) (any, error) {
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, &functionError{fn: "powertools_base64", what: "the string is not base64", cause: err}
			}
			return string(b), nil
		}},
		{Name: "powertools_base64_gzip", Arguments: str, Handler: func(args []any) (any, error) {
			const fn = "powertools_base64_gzip"
			b, err := base64.StdEncoding.DecodeString(args[0].(string))
			if err != nil {
				return nil, &functionError{fn: fn, what: "the string is not base64", cause: err}
			}
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, &functionError{fn: fn, what: "the data is not gzip", cause: err}
			}
			out, err := io.ReadAll(io.LimitReader(zr, maxInflated+1))
			if err != nil {
				return nil, &functionError{fn: fn, what: "the gzip data does not inflate", cause: err}
			}
			if len(out) > maxInflated {
				return nil, &functionError{fn: fn, what: fmt.Sprintf("the data inflates beyond %d bytes", maxInflated)}
			}
			return string(out), nil
		}},
	}
}

// jmespathError is the error of an expression that could not be evaluated over an event.
// Its text names the expression and the kind of failure only, never a value.
// go-jmespath's own errors print the argument a function refused ("invalid type for:
// <argument>"). That may be the whole event, its body and the raw idempotency key in it.
// And this error reaches the guard's log, its OnUnguarded hook and the Lambda runtime's
// log. A typed cause stays reachable through errors.Is and errors.As, but is never
// printed: an event's MarshalJSON error, a [*json.SyntaxError] of powertools_json, a
// [base64.CorruptInputError]. go-jmespath's errors, which are text only, are dropped.
type jmespathError struct {
	prefix string
	expr   string
	what   string // the kind of failure
	cause  error  // nil, or a typed cause (see evalError)
}

func (e *jmespathError) Error() string {
	return fmt.Sprintf("%s: jmespath %q: %s", e.prefix, e.expr, e.what)
}

func (e *jmespathError) Unwrap() error { return e.cause }

// functionError is the error of a Powertools function: fn is its name and what the kind
// of failure, and cause, if any, the decoder's error, which is never printed.
type functionError struct {
	fn    string
	what  string
	cause error
}

func (e *functionError) Error() string { return e.fn + ": " + e.what }

func (e *functionError) Unwrap() error { return e.cause }

// evalError returns the error of evaluating expr that failed with err, without err's
// text. A Powertools function's error keeps its cause. go-jmespath's errors are plain
// text, so only the kind of failure is kept. It is read from the start of the message,
// which names a kind before any value.
func evalError(prefix, expr string, err error) error {
	var fe *functionError
	if errors.As(err, &fe) {
		return &jmespathError{prefix: prefix, expr: expr, what: fe.Error(), cause: fe}
	}
	what := "the expression failed on the event"
	msg := err.Error()
	for _, k := range []struct{ prefix, what string }{
		{"invalid type", "a function's argument has the wrong type"},
		{"invalid value", "a function's argument has a value it does not take"},
		{"invalid arity", "a function has the wrong number of arguments"},
		{"unknown function", "the expression calls an unknown function"},
		{"variable not defined", "the expression uses an undefined variable"},
		{"invalid slice", "the expression slices with a step of 0"},
	} {
		if strings.HasPrefix(msg, k.prefix) {
			what = k.what
			break
		}
	}
	return &jmespathError{prefix: prefix, expr: expr, what: what}
}

func (j *Query) errorf(what string, cause error) error {
	return &jmespathError{prefix: j.prefix, expr: j.expr, what: what, cause: cause}
}
