package lambdaenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/smithy-go/logging"
)

// LogLevelVar is the variable of Lambda's advanced logging controls that sets the
// function's application log level: TRACE, DEBUG, INFO, WARN, ERROR or FATAL.
const LogLevelVar = "AWS_LAMBDA_LOG_LEVEL"

// RequestIDKey is the log attribute that carries the Lambda request ID, named as in Lambda's
// own JSON log lines, so one CloudWatch Logs Insights filter finds an invocation's platform
// and application lines alike.
const RequestIDKey = "requestId"

// Logger returns the examples' logger: JSON lines on w, with Lambda's key names (timestamp,
// level, message), the invocation's request ID on every line logged with the invocation's
// context, and the level from [LogLevelVar] (INFO when unset or unknown).
func Logger(w io.Writer) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       logLevel(os.Getenv(LogLevelVar)),
		ReplaceAttr: lambdacontext.ReplaceAttr,
	})
	return slog.New(requestIDHandler{h})
}

func logLevel(s string) slog.Level {
	switch s {
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "WARN":
		return slog.LevelWarn
	case "ERROR", "FATAL":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// requestIDHandler adds the Lambda request ID of a record's context to the record.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String(RequestIDKey, lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// LocalContext returns ctx carrying a Lambda context with a fresh random request ID, as
// the Lambda runtime gives each invocation, for local runs outside Lambda: their log lines
// then carry a request ID too.
func LocalContext(ctx context.Context) context.Context {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	id = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: id})
}

// sdkLogger writes the AWS SDK's log entries through a [*slog.Logger]: JSON like every
// other line, with the request ID of the call's context.
type sdkLogger struct {
	l   *slog.Logger
	ctx context.Context
}

// Logf implements logging.Logger.
func (s sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelInfo
	switch c {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	s.l.Log(ctx, level, "aws sdk: "+fmt.Sprintf(format, v...))
}

// WithContext implements logging.ContextLogger: the SDK calls it with each operation's
// context.
func (s sdkLogger) WithContext(ctx context.Context) logging.Logger {
	return sdkLogger{l: s.l, ctx: ctx}
}
