package lambdawrap

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

// KeyFromJMESPath returns a key function that evaluates a JMESPath expression.
// The expression expr is evaluated over the event's JSON encoding. This matches the
// Powertools utilities' event_key_jmespath. What it selects becomes the key:
//
//   - A selected string is the key as it is.
//   - Any other value is the key in its compact JSON encoding. So "[order_id, customer_id]"
//     keys on both.
//   - A selected null, empty string, empty object, empty list or list of nulls means the
//     event has no key, as in the Powertools utilities. [Wrap] refuses it with
//     [idem.ErrMissingKey], or runs it unguarded (see [WithKeyRequired]). So events
//     selecting the same empty value never share one record.
//   - Zero and false are keys.
//
// Besides the standard functions, the expression may use the Powertools ones:
//
//   - powertools_json(s) decodes a JSON string, for example an API Gateway body;
//   - powertools_base64(s) decodes base64;
//   - powertools_base64_gzip(s) decodes base64 and inflates gzip.
//
// Integers too large for a float64 keep their exact digits. KeyFromJMESPath returns an
// error if expr does not compile. The returned function is safe for concurrent use.
//
// An expression may fail over an event: a function may meet an argument of the wrong type,
// or powertools_json a string that is not JSON. The returned function then returns an
// error that names the expression and the kind of failure only, never a value of the
// event. So the raw key and the body stay out of the logs, hooks and Lambda errors that
// carry it. A typed cause stays reachable through errors.Is and errors.As: a
// [*json.SyntaxError], a [base64.CorruptInputError], or the error of the event's own
// MarshalJSON.
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
		if err != nil {
			return "", &jmespathError{expr: q.expr, what: fmt.Sprintf("the selected value does not encode as JSON (%T)", err), cause: err}
		}
		return string(b), nil
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

// search evaluates the expression over v's JSON encoding. Its errors are
// [*jmespathError]s, which never print the event.
func (j *jmespathQuery) search(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &jmespathError{expr: j.expr, what: fmt.Sprintf("the event does not encode as JSON (%T)", err), cause: err}
	}
	doc, err := decodeJSON(b)
	if err != nil {
		return nil, &jmespathError{expr: j.expr, what: "the event's JSON encoding does not decode", cause: err}
	}
	out, err := j.q.Search(toSearchable(doc))
	if err != nil {
		return nil, evalError(j.expr, err)
	}
	return out, nil
}

// fingerprint is the canonical JSON of what the expression selects.
func (j *jmespathQuery) fingerprint(v any) ([]byte, error) {
	out, err := j.search(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out) // encoding/json sorts map keys: the encoding is canonical
	if err != nil {
		return nil, &jmespathError{expr: j.expr, what: fmt.Sprintf("the selected value does not encode as JSON (%T)", err), cause: err}
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

// maxExactInt bounds the integers a float64 holds exactly (beyond it, 2^53+1 reads as 2^53).
const maxExactInt = 1 << 53

// toSearchable turns the json.Numbers of a decoded document into float64s.
// JMESPath functions and comparisons work on those. Integers too large for a float64 to
// hold exactly are the exception: they keep their digits, so ids used as keys never
// collide.
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
	expr  string
	what  string // the kind of failure
	cause error  // nil, or a typed cause (see evalError)
}

func (e *jmespathError) Error() string {
	return fmt.Sprintf("lambdawrap: jmespath %q: %s", e.expr, e.what)
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
func evalError(expr string, err error) error {
	var fe *functionError
	if errors.As(err, &fe) {
		return &jmespathError{expr: expr, what: fe.Error(), cause: fe}
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
	return &jmespathError{expr: expr, what: what}
}
