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

// Limits of the local adapter, as API Gateway HTTP APIs have them.
const (
	// LocalTimeout is the deadline [LocalHandler] gives each invocation: API Gateway's
	// integration timeout.
	LocalTimeout = 29 * time.Second
	// LocalMaxBody is the largest request body [LocalHandler] accepts, in bytes: API
	// Gateway's payload limit. A larger one gets 413.
	LocalMaxBody = 10 << 20
)

// LocalHandler serves an API Gateway HTTP API handler (payload format 2.0) over plain HTTP,
// so a function can run on localhost and be tested with any HTTP client. It turns each
// request into the event API Gateway would send, calls h with a context that ends after
// [LocalTimeout] and carries a request id (see lambdacontext), and writes h's response back.
//
// The event has lower-case header names with repeated headers joined by commas, cookies in
// Cookies rather than a header, the raw path and query string, and a body that is base64
// encoded unless its Content-Type is text, JSON, XML or a form. When h fails the client gets
// 500 {"message":"Internal Server Error"} (503 after the deadline), as from API Gateway.
// It is safe for concurrent use as long as h is.
func LocalHandler(h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) http.Handler {
	return localHandler(h)
}

type localHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

func (h localHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, LocalMaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeMessage(w, http.StatusRequestEntityTooLarge)
			return
		}
		writeMessage(w, http.StatusBadRequest)
		return
	}
	id := requestID()
	ev := localEvent(r, body, id, time.Now())

	ctx, cancel := context.WithTimeout(r.Context(), LocalTimeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: id})
	resp, err := h(ctx, ev)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			writeMessage(w, http.StatusServiceUnavailable)
			return
		}
		writeMessage(w, http.StatusInternalServerError)
		return
	}
	writeResponse(w, &resp)
}

// localEvent builds the HTTP API event for r.
func localEvent(r *http.Request, body []byte, id string, now time.Time) events.APIGatewayV2HTTPRequest {
	headers := make(map[string]string, len(r.Header)+1)
	for name, values := range r.Header {
		name = strings.ToLower(name)
		if name == "cookie" {
			continue
		}
		headers[name] = strings.Join(values, ",")
	}
	headers["host"] = r.Host
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	sourceIP, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		sourceIP = r.RemoteAddr
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     "$default",
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    id,
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.SplitN(r.Host, ".", 2)[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
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

// writeResponse writes the handler's response as API Gateway would.
func writeResponse(w http.ResponseWriter, resp *events.APIGatewayV2HTTPResponse) {
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			writeMessage(w, http.StatusInternalServerError)
			return
		}
		body = b
	}
	h := w.Header()
	// No Content-Type unless the handler set one: API Gateway does not sniff.
	h["Content-Type"] = nil
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client may be gone; nothing left to tell it
}

// writeMessage writes API Gateway's own JSON error body for status.
func writeMessage(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"message":"`+http.StatusText(status)+`"}`)
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	s := hex.EncodeToString(b[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}
