package idem

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// Defaults of the [Guard] options.
const (
	// DefaultExpiry is how long a completed record is replayed (see [WithExpiry]).
	DefaultExpiry = time.Hour
	// DefaultLease is how long a handler may run when its context has no deadline; its lease
	// adds the margin (see [WithLease]).
	DefaultLease = time.Minute
	// DefaultLeaseMargin is added to the context deadline (or to WithLease without one) to
	// end the lease (see [WithLeaseMargin]). It is also the clock skew between callers that
	// the lease tolerates.
	DefaultLeaseMargin = 2 * time.Second
	// DefaultMaxLease caps any lease (see [WithMaxLease]): the longest Lambda timeout.
	DefaultMaxLease = 15 * time.Minute
	// DefaultCompressionThreshold is the encoded size in bytes above which results are
	// gzip-compressed (see [WithCompression]).
	DefaultCompressionThreshold = 1024
	// DefaultMaxResultSize is the largest stored result in bytes, after compression (see
	// [WithMaxResultSize]): DynamoDB's 400 KB item limit less room for the other attributes.
	DefaultMaxResultSize = 390 * 1024
	// DefaultScope is the key scope outside Lambda when [WithScope] is not given (in
	// Lambda, the function's name is).
	DefaultScope = "default"
	// MaxKeyLength is the longest caller key accepted, in bytes.
	MaxKeyLength = 1024
	// MaxOperationLength is the longest operation name [New] accepts, in bytes.
	MaxOperationLength = 128
	// MaxScopeLength is the longest scope [WithScope] accepts, in bytes. With the longest
	// operation and the 64-hex-digit hash, a stored key is at most 322 bytes, well within
	// the key limits of every store (DynamoDB's sort key is the shortest, at 1024 bytes).
	MaxScopeLength = 128
)

// Option configures a [Guard]. Options are applied in order by [New].
type Option func(*config) error

type config struct {
	expiry        time.Duration
	lease         time.Duration
	leaseMargin   time.Duration
	maxLease      time.Duration
	scope         string
	cacheSize     int
	waitMax       time.Duration
	waitPoll      time.Duration
	rememberFail  func(error) bool
	heartbeat     time.Duration
	codec         Codec
	compressAbove int
	maxResult     int
	failOpen      bool
	clock         Clock
	logger        *slog.Logger
	hooks         Hooks
	gzipWriters   *sync.Pool // of *gzip.Writer, shared by the guard's calls
	gzipReaders   *sync.Pool // of *gzip.Reader, likewise
}

func optErr(name, msg string) error { return fmt.Errorf("%w: %s: %s", ErrInvalidOption, name, msg) }

// WithExpiry sets how long a completed or failed record is kept and replayed, counted from
// completion. An in-progress record expires this long after its lease ends. Default
// [DefaultExpiry]; must be positive. It becomes the record's TTL attribute, but a record
// past it counts as absent even before DynamoDB deletes it.
func WithExpiry(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("WithExpiry", "must be positive")
		}
		c.expiry = d
		return nil
	}
}

// WithLease sets how long a handler may run when its context has no deadline: the lease is
// then WithLease plus [WithLeaseMargin], measured on the guard's clock, and the handler's
// context ends when the WithLease part is over (see [WithMaxLease] for how). Default
// [DefaultLease]; must be positive. With a deadline (as in Lambda), the lease ends at the
// deadline plus the margin. Either way the part before the margin is capped by
// [WithMaxLease].
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("WithLease", "must be positive")
		}
		c.lease = d
		return nil
	}
}

// WithLeaseMargin sets how long a lease lasts past the end of the handler's time (the
// context deadline, or [WithLease] without one), so a slow completion still lands and a
// caller whose clock runs ahead by up to this much never takes over a live owner. Default
// [DefaultLeaseMargin]; must not be negative.
func WithLeaseMargin(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return optErr("WithLeaseMargin", "must not be negative")
		}
		c.leaseMargin = d
		return nil
	}
}

// WithMaxLease caps the lease: the lease ends at most this long, plus [WithLeaseMargin],
// after the claim, whatever the context's deadline. Default [DefaultMaxLease], the longest
// Lambda timeout; must be positive.
//
// The handler's context never outlives its lease: whenever the lease less the margin ends
// before the context's deadline (a cap below the deadline, or no deadline at all), a lease
// watchdog cancels the handler's context at that moment, with a cause wrapping
// [ErrLeaseLost], and [Hooks.OnLeaseLost] runs; if the moment has passed when the handler
// starts (a slow claim, a batch request started late), its context has ended already. A
// handler that stops when its context ends thus never runs alongside a caller that takes
// its key over, within the clock skew the margin tolerates. [WithHeartbeat] extends the
// lease, and the watchdog follows the extensions.
func WithMaxLease(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("WithMaxLease", "must be positive")
		}
		c.maxLease = d
		return nil
	}
}

// WithScope sets the key scope: the first part of every stored key, before the operation
// (see [New]), so that functions sharing a table never share records. Default: in a Lambda
// function, the function's name, which [New] reads from AWS_LAMBDA_FUNCTION_NAME (as
// aws-lambda-go's lambdacontext.FunctionName does, and as the Powertools utilities scope
// keys); elsewhere [DefaultScope]. Set it to keep records apart that the function's name
// would not (two functions of one name in two stacks sharing a table), or to keep the
// keys of a function renamed since. Like the operation, a scope is 1 to [MaxScopeLength]
// bytes of printable ASCII without spaces or '#' (a Lambda function name always is): the
// stored key has exactly one '#', before its hash, so no scope can make a key of another
// form.
func WithScope(scope string) Option {
	return func(c *config) error {
		if scope == "" {
			return optErr("WithScope", "must not be empty (lambdacontext.FunctionName is empty outside Lambda): "+
				"leave WithScope out to scope by the function's name in Lambda and by DefaultScope elsewhere")
		}
		if msg := checkScope(scope); msg != "" {
			return optErr("WithScope", msg)
		}
		c.scope = scope
		return nil
	}
}

// functionNameVar is the environment variable in which the Lambda runtime gives the
// function's name.
const functionNameVar = "AWS_LAMBDA_FUNCTION_NAME"

// defaultScope returns the scope of a guard without [WithScope]: the Lambda function's
// name, else [DefaultScope]. It is the one environment read of package idem (see
// README's design decisions): a per-function default cannot come from aws-lambda-go,
// which idem does not import, and every user who calls [New] must get it, wrapper or not.
// A name that is no valid scope (set by hand outside Lambda) is an error, never a silent
// fallback to a scope other functions share.
func defaultScope() (string, error) {
	name := os.Getenv(functionNameVar)
	if name == "" {
		return DefaultScope, nil
	}
	if msg := checkScope(name); msg != "" {
		return "", optErr("WithScope", fmt.Sprintf("not given, and the function name in %s is no scope (%s): give WithScope", functionNameVar, msg))
	}
	return name, nil
}

// checkScope says what is wrong with a non-empty scope, "" if nothing.
func checkScope(scope string) string {
	if len(scope) > MaxScopeLength {
		return fmt.Sprintf("%d bytes, more than %d", len(scope), MaxScopeLength)
	}
	if !keyName(scope) {
		return fmt.Sprintf("%q: printable ASCII without spaces or '#' only", scope)
	}
	return ""
}

// WithCache keeps up to size completed records in a local LRU cache, so a warm replay
// costs no store round trip. Entries leave at their record's expiry. Default off (0); must
// not be negative. Only results this guard completed or replayed are cached, so a record
// deleted by hand from the store may still be replayed by a warm container until it expires.
func WithCache(size int) Option {
	return func(c *config) error {
		if size < 0 {
			return optErr("WithCache", "must not be negative")
		}
		c.cacheSize = size
		return nil
	}
}

// WithWait makes a request that finds its key in progress wait for the owner, polling the
// store every poll (doubling up to one second) for at most maxWait, instead of returning
// [ErrInProgress] at once. Default off. maxWait must be positive and poll positive and not
// longer than maxWait.
//
// The wait ends with the owner's result, or with a claim of its own if the record goes away
// or its lease ends; else with an [*InProgressError] when maxWait has passed or, sooner, at
// the context's deadline less [WithLeaseMargin], so that a Lambda function answers (409
// with Retry-After through the HTTP wrappers) before its timeout; and with the context's
// error if the context is cancelled first.
func WithWait(maxWait, poll time.Duration) Option {
	return func(c *config) error {
		if maxWait <= 0 || poll <= 0 || poll > maxWait {
			return optErr("WithWait", "maxWait and poll must be positive, poll at most maxWait")
		}
		c.waitMax, c.waitPoll = maxWait, poll
		return nil
	}
}

// WithRememberFailures stores handler errors for which permanent returns true as
// [idemstore.StatusFailed] records; their retries get a [*FailedError] without running.
// Default off: every failure releases the key so the next retry runs again. Must not be
// nil.
func WithRememberFailures(permanent func(error) bool) Option {
	return func(c *config) error {
		if permanent == nil {
			return optErr("WithRememberFailures", "predicate must not be nil")
		}
		c.rememberFail = permanent
		return nil
	}
}

// WithHeartbeat extends the lease every interval, counted from the claim, while the handler
// runs, for work that may outlive its lease. Each beat moves the lease end to at least
// min([WithLease], [WithMaxLease]) plus [WithLeaseMargin] from then. It is never earlier
// than the deadline-based end, and never past the record's expiry, which is [WithExpiry]
// after the first lease end: work longer than that needs a longer expiry. A request whose
// handler starts an interval or more after its claim (a batch) beats at once.
//
// The handler's context is cancelled, with a cause wrapping [ErrLeaseLost]:
//
//   - as soon as an extension finds the lease taken over;
//   - when no extension has succeeded by the lease end last confirmed (by the claim or the
//     last successful extension) less [WithLeaseMargin]. That is the earliest moment a
//     caller whose clock runs ahead by the margin may take the key over (the lease
//     watchdog of [WithMaxLease]).
//
// [Hooks.OnLeaseLost] runs either way. An extension that fails with a store error
// (throttling, network) is reported to [Hooks.OnStoreError], and the beats go on until
// that moment. So a handler that stops when its context ends never runs alongside the key's next
// owner; one that ignores its context may. Whatever the handler then returns is recorded
// as usual, fenced by the lease token:
//
//   - an error releases the key;
//   - a result completes it if the lease is in fact still ours (the store was only
//     unreachable), or else the caller gets [ErrLeaseLost].
//
// Default off (0); must not be negative. It must be at most half of min(WithLease,
// WithMaxLease) less WithLeaseMargin, so that the lease survives one failed beat with room
// to spare: [New] returns an error naming WithHeartbeat otherwise.
func WithHeartbeat(interval time.Duration) Option {
	return func(c *config) error {
		if interval < 0 {
			return optErr("WithHeartbeat", "must not be negative")
		}
		c.heartbeat = interval
		return nil
	}
}

// WithCodec sets how results are encoded. Default [JSONCodec]. Must not be nil, and its
// Name must be non-empty and contain no '+'.
func WithCodec(codec Codec) Option {
	return func(c *config) error {
		if codec == nil || codec.Name() == "" || containsPlus(codec.Name()) {
			return optErr("WithCodec", "codec must be non-nil with a name without '+'")
		}
		c.codec = codec
		return nil
	}
}

// WithCompression sets the encoded size in bytes above which results are gzip-compressed
// before they are stored. Default [DefaultCompressionThreshold]; must not be negative. Use
// a very large value to turn compression off. Results longer than 64 MiB are never
// compressed, since a replay inflates no more than that (see [WithMaxResultSize]).
func WithCompression(threshold int) Option {
	return func(c *config) error {
		if threshold < 0 {
			return optErr("WithCompression", "must not be negative")
		}
		c.compressAbove = threshold
		return nil
	}
}

// WithMaxResultSize sets the largest result stored, in bytes after compression. A larger
// one completes the key without its body, so the work is never repeated, and replays get
// [ErrResultNotStored]. Results longer than 64 MiB before compression are not compressed
// (a replay would refuse to inflate them), so they too are stored without a body unless
// the limit admits them uncompressed. Default [DefaultMaxResultSize]; must be positive.
func WithMaxResultSize(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return optErr("WithMaxResultSize", "must be positive")
		}
		c.maxResult = n
		return nil
	}
}

// WithFailOpen runs the handler unguarded when the store fails to claim the key, instead of
// failing closed with [ErrStore]. Default false. Only for work whose duplicates are cheap.
// It applies only when the call could not learn the key's state. A store failure returns
// the store error, and the handler does not run:
//
//   - once a claim, read or poll of the call met the record holding the key, since the
//     key may be completed or in progress elsewhere, or hold a checkpoint of effects
//     already made. That covers a claim that met the record but failed to read all of it
//     (a result the DynamoDB store keeps in an item of its own, say), a takeover claim
//     carrying a checkpoint the first claim returned, a claim after a [WithWait] poll, a
//     batch claim's record ([Guard.Claim]), and the record an earlier call met that
//     shares the call's [KeyMet] ([DoMet]: a caller polling a key in flight elsewhere);
//   - for a claim the store refused without returning the record: the store said the key
//     is taken;
//   - for a caller whose context has ended by the time the claim fails, whatever the
//     store's error.
func WithFailOpen(failOpen bool) Option {
	return func(c *config) error {
		c.failOpen = failOpen
		return nil
	}
}

// WithClock sets the time source and timers, for tests. Default: the system clock. Must not
// be nil.
//
// The guard has one timeline, this clock's: it reads a context's deadline as an instant of
// it, since ctx.Deadline() does not say which clock it was meant for. The lease of a
// handler with a deadline ends at the deadline plus [WithLeaseMargin] (capped by
// [WithMaxLease]), and the time left before it, for the handler's context, [WithWait] and
// the completion's retries, is the deadline less the clock's Now (package sqs, which holds
// messages back near the deadline, reads it on the guard's clock too). A deadline from
// context.WithTimeout is in wall time, so with a clock far from wall time:
//
//   - a clock behind wall time (fixed in the past) sees every deadline far ahead: every
//     lease gets the cap, WithMaxLease plus the margin, and a duplicate's Retry-After is
//     902 s with the defaults;
//   - a clock ahead of wall time sees every deadline passed: every lease is the shortest,
//     1 s.
//
// To test with deadlines, keep the clock on wall time's instant (start it at time.Now()
// and move it forward) and give contexts deadlines in its time
// (context.WithDeadline(ctx, clock.Now().Add(d))), or use contexts without a deadline,
// whose leases [WithLease] sets on the clock alone. A context.WithDeadline in the past of
// wall time has ended already, so a clock fixed far in the past takes contexts without
// deadlines (or a context type whose Deadline reports the clock's time).
func WithClock(c Clock) Option {
	return func(cfg *config) error {
		if c == nil {
			return optErr("WithClock", "must not be nil")
		}
		cfg.clock = c
		return nil
	}
}

// WithLogger sets the logger for events a caller cannot see in return values: a possible
// double execution, a failed release. Default: discard. Keys are logged only in their
// stored (hashed) form, never request bodies. Must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return optErr("WithLogger", "must not be nil")
		}
		c.logger = l
		return nil
	}
}

// WithHooks sets callbacks for metrics and tracing. Default none. Nil fields do nothing.
func WithHooks(h Hooks) Option {
	return func(c *config) error {
		c.hooks = h
		return nil
	}
}

// checkHeartbeat refuses a heartbeat interval that would let a lease lapse after one missed
// beat. The lease checked is the one a claim without a deadline is granted, WithLease
// capped by WithMaxLease (plus the margin): with a deadline the lease is longer (the
// deadline, capped by WithMaxLease, plus the margin) or the context ends with it. The
// watchdog cancels the handler's context when no extension has succeeded by the lease end
// less the margin; two beats must fit before that point even counted from the lease less
// another margin, so that an extension that is slow to answer still lands in time.
func (c *config) checkHeartbeat() error {
	if c.heartbeat <= 0 {
		return nil
	}
	granted := min(c.lease, c.maxLease)
	if limit := (granted - c.leaseMargin) / 2; c.heartbeat > limit {
		return optErr("WithHeartbeat", fmt.Sprintf(
			"interval %s is above %s: half of the lease granted, %s (WithLease capped by WithMaxLease), less WithLeaseMargin %s",
			c.heartbeat, max(limit, 0), granted, c.leaseMargin))
	}
	return nil
}

func containsPlus(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '+' {
			return true
		}
	}
	return false
}

var errNilStore = fmt.Errorf("%w: New: store must not be nil", ErrInvalidOption)

// checkOperation validates the operation name given to [New].
func checkOperation(op string) error {
	if op == "" || len(op) > MaxOperationLength {
		return fmt.Errorf("%w: New: operation must be 1 to %d bytes", ErrInvalidOption, MaxOperationLength)
	}
	// No '.': the stored key is "<scope>.<operation>#<hash>" and the scope may hold dots, so
	// the operation is what follows the key prefix's last '.', and no two (scope, operation)
	// pairs make one prefix.
	if !keyName(op) || strings.Contains(op, ".") {
		return fmt.Errorf("%w: New: operation %q: printable ASCII without spaces, '#' or '.' only", ErrInvalidOption, op)
	}
	return nil
}

// keyName reports whether s may be a part of a stored key before its hash (the scope or
// the operation): printable ASCII without spaces or '#'.
func keyName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '#' {
			return false
		}
	}
	return true
}
