package emf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// Limits of one EMF document, from the specification.
const (
	// MaxMetrics is how many metrics one document may define.
	MaxMetrics = 100
	// MaxDimensions is how many dimensions a dimension set may hold.
	MaxDimensions = 30
	// MaxValues is how many values one metric may carry in one document.
	MaxValues = 100
)

// Unit is a CloudWatch metric unit, such as "Count" or "Milliseconds".
type Unit string

// The units idem's metrics use.
const (
	// UnitCount counts events.
	UnitCount Unit = "Count"
	// UnitMilliseconds measures durations.
	UnitMilliseconds Unit = "Milliseconds"
)

// Recorder collects metrics and writes them as EMF documents. It is safe for concurrent use;
// create one per function (container) and flush it once per invocation ([Wrap]).
type Recorder struct {
	w   io.Writer
	cfg config

	mu      sync.Mutex
	metrics []*metric         // in the order first recorded
	byName  map[metricKey]int // index into metrics
}

// metricKey names a metric of one operation ("" for none).
type metricKey struct{ name, op string }

// metric is one metric's values since the last flush.
type metric struct {
	name   string
	op     string // the value of DimensionOperation; "" for none
	unit   Unit
	sum    bool      // a count: values holds one running total
	values []float64 // observations, or the total
}

// Option configures a [Recorder]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	namespace string
	dims      []dimension
	clock     idem.Clock
}

type dimension struct{ name, value string }

// New returns a Recorder that writes documents to w (os.Stdout in Lambda, where CloudWatch
// Logs reads them) under the CloudWatch namespace. The namespace must be 1 to 255
// characters. Invalid settings return an error naming the option.
func New(w io.Writer, namespace string, opts ...Option) (*Recorder, error) {
	if w == nil {
		return nil, errors.New("emf: New: writer must not be nil")
	}
	if namespace == "" || len(namespace) > 255 {
		return nil, errors.New("emf: New: namespace must be 1 to 255 characters")
	}
	cfg := config{namespace: namespace, clock: idem.ClockFunc(time.Now)}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Recorder{w: w, cfg: cfg, byName: make(map[metricKey]int)}, nil
}

// WithDimension adds a dimension, such as "Service" with the function's name, to every
// metric. Default none: metrics are published without dimensions. Choose values with few
// distinct values over time (never a request, key or message ID): each distinct value is
// a separate CloudWatch metric. Name and value must be non-empty ASCII without control
// characters, the name at most 255 characters and not starting with ':', the value at most
// 1024; at most [MaxDimensions] dimensions, with distinct names that name no metric of this
// package (a metric recorded with [Recorder.Count] or [Recorder.Observe] under a
// dimension's name is refused).
func WithDimension(name, value string) Option {
	return func(c *config) error {
		switch {
		case !validText(name, 255) || name[0] == ':' || name == awsKey:
			return fmt.Errorf("emf: WithDimension: invalid name %q", name)
		case reserved(name):
			return fmt.Errorf("emf: WithDimension: %q names one of idem's metrics", name)
		case !validText(value, 1024):
			return fmt.Errorf("emf: WithDimension: invalid value for %q", name)
		case len(c.dims) == MaxDimensions:
			return fmt.Errorf("emf: WithDimension: at most %d dimensions", MaxDimensions)
		}
		for _, d := range c.dims {
			if d.name == name {
				return fmt.Errorf("emf: WithDimension: %q given twice", name)
			}
		}
		c.dims = append(c.dims, dimension{name, value})
		return nil
	}
}

// WithClock sets the clock that timestamps documents, for tests. Default: the system
// clock. Must not be nil.
func WithClock(clock idem.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errors.New("emf: WithClock: must not be nil")
		}
		c.clock = clock
		return nil
	}
}

// validText reports whether s is 1 to max printable ASCII characters, not all spaces, as
// CloudWatch requires of dimension names and values.
func validText(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	blank := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
		blank = blank && s[i] == ' '
	}
	return !blank
}

// ErrInvalidMetric means a metric's name or value cannot be published: an empty name or one
// longer than 255 characters, the name of a dimension, "_aws", a name recorded before with
// another unit or kind, or a value that is not a finite number.
var ErrInvalidMetric = errors.New("emf: invalid metric")

// Count adds n to the count name (unit Count), summed until the next flush.
// It returns [ErrInvalidMetric] for a name or value that cannot be published.
func (r *Recorder) Count(name string, n float64) error {
	return r.record(name, "", UnitCount, true, n)
}

// Observe records one observation v of name in unit, such as a duration in
// [UnitMilliseconds]; every observation is kept until the next flush, so CloudWatch has the
// distribution. It returns [ErrInvalidMetric] for a name or value that cannot be published.
func (r *Recorder) Observe(name string, unit Unit, v float64) error {
	return r.record(name, "", unit, false, v)
}

// record records v of name for operation op ("" for none), in unit, summed if sum.
func (r *Recorder) record(name, op string, unit Unit, sum bool, v float64) error {
	if name == "" || len(name) > 255 || name == awsKey || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %q", ErrInvalidMetric, name)
	}
	for _, d := range r.cfg.dims {
		if d.name == name {
			return fmt.Errorf("%w: %q is a dimension", ErrInvalidMetric, name)
		}
	}
	if !r.operations() || !validText(op, 1024) {
		op = ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := metricKey{name, op}
	i, ok := r.byName[k]
	if !ok {
		i = len(r.metrics)
		r.byName[k] = i
		r.metrics = append(r.metrics, &metric{name: name, op: op, unit: unit, sum: sum})
	}
	m := r.metrics[i]
	switch {
	case m.unit != unit || m.sum != sum:
		return fmt.Errorf("%w: %q recorded before as another unit or kind", ErrInvalidMetric, name)
	case sum && len(m.values) == 1:
		m.values[0] += v
	default:
		m.values = append(m.values, v)
	}
	return nil
}

// operations reports whether metrics may carry [DimensionOperation]: the recorder has no
// dimension of that name, and room for one more.
func (r *Recorder) operations() bool {
	if len(r.cfg.dims) >= MaxDimensions {
		return false
	}
	for _, d := range r.cfg.dims {
		if d.name == DimensionOperation {
			return false
		}
	}
	return true
}

// Flush writes what was recorded since the last flush and starts over. It writes one
// document per operation ([DimensionOperation]; the metrics of none, such as a batch's,
// join the first), or more when some metric has more than [MaxValues] observations or
// there are more than [MaxMetrics] metrics, each on its own line, and nothing when nothing
// was recorded. An error comes from the writer; the metrics of a failed flush are dropped, so
// a broken writer does not grow the recorder without bound.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	metrics := r.metrics
	r.metrics = nil
	clear(r.byName)
	r.mu.Unlock()
	if len(metrics) == 0 {
		return nil
	}
	out, err := encode(r.cfg, r.cfg.clock.Now(), metrics)
	if err != nil {
		return err
	}
	_, err = r.w.Write(out)
	return err
}
