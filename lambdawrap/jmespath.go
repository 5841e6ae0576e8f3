package lambdawrap

import (
	"fmt"

	"github.com/idemkit/idem/internal/jmespathkey"
)

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
	q, err := jmespathkey.Compile("lambdawrap", expr)
	if err != nil {
		return nil, fmt.Errorf("lambdawrap: KeyFromJMESPath: %w", err)
	}
	return func(in In) (string, error) { return q.Key(in) }, nil
}
