package lambdawrap

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Limits of the local adapter, as API Gateway has them.
const (
	// LocalTimeout is the deadline [LocalHandler] gives each invocation: API Gateway's
	// integration timeout. Load balancer targets get it too.
	LocalTimeout = 29 * time.Second
	// LocalMaxBody is the largest request body [LocalHandler] accepts, in bytes: API
	// Gateway's payload limit. A larger one gets 413. (A load balancer allows its Lambda
	// targets less, 1 MB, which the adapter does not enforce.)
	LocalMaxBody = 10 << 20
)

// LocalFunc is the type of a handler [LocalHandler] serves, as [HTTPAPI], [REST] and [ALB]
// return them:
//
//   - an API Gateway HTTP API handler (payload format 2.0);
//   - an API Gateway REST API handler (Lambda proxy integration);
//   - a load balancer handler.
type LocalFunc interface {
	func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) |
		func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) |
		func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)
}

// LocalHandler serves a Lambda HTTP handler over plain HTTP.
// So a function can run on localhost and be tested with any HTTP client. For each request,
// LocalHandler:
//
//   - turns the request into the event its integration would send;
//   - calls h with a context that carries a request id (see lambdacontext). The context
//     ends after [LocalTimeout], or at the request context's deadline if sooner;
//   - writes h's response back as the integration would.
//
// A client that hangs up does not end the invocation, as it does not in API Gateway. A
// guarded run goes on and records its result, which the client's retry replays.
//
// The event has the raw path and query string. Its body is base64 encoded unless its
// Content-Type is text, JSON, XML or a form. Besides, per integration:
//
//   - HTTP API: lower-case header names with repeated headers joined by commas, and cookies
//     in Cookies rather than a header. When h fails, the client gets 500
//     {"message":"Internal Server Error"} (503 after the deadline).
//   - REST API: the event of a proxy resource, /{proxy+}. Headers and query parameters are
//     in both the single-value maps (the last value) and the multi-value ones. When h
//     fails, or answers without a status, the client gets 502 {"message": "Internal server
//     error"} (504 after the deadline).
//   - Load balancer: the event of a target group without multi-value headers. It has
//     lower-case header names, the last value of a repeated header or query parameter, the
//     query string as sent, and the target group's ARN. When h fails, or answers without a
//     status, the client gets the balancer's 502 page (504 after the deadline).
//
// It is safe for concurrent use as long as h is.
func LocalHandler[H LocalFunc](h H) http.Handler {
	switch h := any(h).(type) {
	case func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error):
		return localHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{h: h, i: httpAPILocal}
	case func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error):
		return localHandler[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{h: h, i: restLocal}
	case func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error):
		return localHandler[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse]{h: h, i: albLocal}
	}
	panic("lambdawrap: LocalHandler: unreachable: LocalFunc admits no other type")
}

// integration is what the local adapter knows of one way of invoking a function.
// That is the event it sends for a request, how it writes the function's response, and
// what it answers when the function fails.
type integration[In, Out any] struct {
	event func(r *http.Request, body []byte, id string, now time.Time) In
	write func(w http.ResponseWriter, resp *Out)
	fail  func(w http.ResponseWriter, timedOut bool)
}

type localHandler[In, Out any] struct {
	h func(context.Context, In) (Out, error)
	i integration[In, Out]
}

func (l localHandler[In, Out]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, LocalMaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeMessage(w, http.StatusRequestEntityTooLarge, "application/json", `{"message":"Request Entity Too Large"}`)
			return
		}
		writeMessage(w, http.StatusBadRequest, "application/json", `{"message":"Bad Request"}`)
		return
	}
	id := requestID()
	ev := l.i.event(r, body, id, time.Now())

	ctx, cancel := invocationContext(r.Context())
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: id})
	resp, err := l.h(ctx, ev)
	if err != nil {
		l.i.fail(w, errors.Is(ctx.Err(), context.DeadlineExceeded))
		return
	}
	l.i.write(w, &resp)
}

// invocationContext returns the context of one invocation.
// It has the request's values and deadline, bounded by [LocalTimeout], but not its
// cancellation. API Gateway and load balancers never cancel an invocation when the client
// goes away, so neither does the adapter. A run that holds a key goes on. The client's
// retry is told the key is in flight, and then replays the run's result. It does not run
// the handler again after a release the hang-up caused.
func invocationContext(r context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(LocalTimeout)
	if d, ok := r.Deadline(); ok && d.Before(deadline) {
		deadline = d // a server's deadline (http.TimeoutHandler, say) still bounds it
	}
	return context.WithDeadline(context.WithoutCancel(r), deadline)
}

// writeBody writes a response's status and body, decoding the body from base64 when
// flagged; a body that does not decode fails the response with fail. setHeaders sets the
// headers. Nothing sets a Content-Type the function did not: the integrations do not sniff.
func writeBody(w http.ResponseWriter, status int, body string, b64 bool, setHeaders func(http.Header), fail func()) {
	b := []byte(body)
	if b64 {
		d, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			fail()
			return
		}
		b = d
	}
	h := w.Header()
	h["Content-Type"] = nil
	setHeaders(h)
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client may be gone; nothing left to tell it
}

// writeMessage writes an integration's own error answer.
func writeMessage(w http.ResponseWriter, status int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// requestBody returns the event's body and whether it is base64 encoded: text, JSON, XML
// and forms reach the function as they are, anything else in base64.
func requestBody(r *http.Request, body []byte) (string, bool) {
	if len(body) == 0 {
		return "", false
	}
	if isText(r.Header.Get("Content-Type")) {
		return string(body), false
	}
	return base64.StdEncoding.EncodeToString(body), true
}

// isText reports whether a body of this media type reaches the function as text.
func isText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"),
		mt == "application/json", mt == "application/xml", mt == "application/javascript",
		mt == "application/x-www-form-urlencoded", mt == "application/graphql":
		return true
	}
	return false
}

// sourceIP returns the client's address without its port.
func sourceIP(r *http.Request) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return ip
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	s := hex.EncodeToString(b[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}
