package lambdawrap

import (
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// The integrations [LocalHandler] plays: an HTTP API, a REST API's proxy resource, and a
// load balancer target group without multi-value headers.
var (
	httpAPILocal = integration[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
		event: httpAPIEvent, write: writeHTTPAPI, fail: apiGatewayFailure(http.StatusInternalServerError, http.StatusServiceUnavailable),
	}
	restLocal = integration[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
		event: restEvent, write: writeREST, fail: restFailure,
	}
	albLocal = integration[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse]{
		event: albEvent, write: writeALB, fail: albFailure,
	}
)

// localTime is the request time as API Gateway writes it.
func localTime(now time.Time) string { return now.UTC().Format("02/Jan/2006:15:04:05 -0700") }

// httpAPIEvent builds the HTTP API event for r.
func httpAPIEvent(r *http.Request, body []byte, id string, now time.Time) events.APIGatewayV2HTTPRequest {
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
			Time:         localTime(now),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP(r),
				UserAgent: r.UserAgent(),
			},
		},
	}
	ev.Body, ev.IsBase64Encoded = requestBody(r, body)
	return ev
}

func writeHTTPAPI(w http.ResponseWriter, resp *events.APIGatewayV2HTTPResponse) {
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	writeBody(w, status, resp.Body, resp.IsBase64Encoded, func(h http.Header) {
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
	}, func() { apiGatewayFailure(http.StatusInternalServerError, 0)(w, false) })
}

// apiGatewayFailure answers a failed function as an HTTP API does: status, or timeout
// after the deadline, with the status text as the message.
func apiGatewayFailure(status, timeout int) func(http.ResponseWriter, bool) {
	return func(w http.ResponseWriter, timedOut bool) {
		code := status
		if timedOut {
			code = timeout
		}
		writeMessage(w, code, "application/json", `{"message":"`+http.StatusText(code)+`"}`)
	}
}

// restEvent builds the event a REST API's proxy resource, /{proxy+}, sends for r.
func restEvent(r *http.Request, body []byte, id string, now time.Time) events.APIGatewayProxyRequest {
	headers := make(map[string]string, len(r.Header)+1)
	multiHeaders := make(map[string][]string, len(r.Header)+1)
	for name, values := range r.Header {
		headers[name] = values[len(values)-1]
		multiHeaders[name] = values
	}
	headers["Host"], multiHeaders["Host"] = r.Host, []string{r.Host}
	var query map[string]string
	var multiQuery map[string][]string
	if q := r.URL.Query(); len(q) > 0 {
		query, multiQuery = make(map[string]string, len(q)), q
		for k, vs := range q {
			query[k] = vs[len(vs)-1]
		}
	}
	ev := events.APIGatewayProxyRequest{
		Resource:                        "/{proxy+}",
		Path:                            r.URL.Path,
		HTTPMethod:                      r.Method,
		Headers:                         headers,
		MultiValueHeaders:               multiHeaders,
		QueryStringParameters:           query,
		MultiValueQueryStringParameters: multiQuery,
		PathParameters:                  map[string]string{"proxy": strings.TrimPrefix(r.URL.Path, "/")},
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID:        "000000000000",
			ResourceID:       "local",
			Stage:            "local",
			DomainName:       r.Host,
			DomainPrefix:     strings.SplitN(r.Host, ".", 2)[0],
			RequestID:        id,
			Protocol:         r.Proto,
			Identity:         events.APIGatewayRequestIdentity{SourceIP: sourceIP(r), UserAgent: r.UserAgent()},
			ResourcePath:     "/{proxy+}",
			Path:             r.URL.Path,
			HTTPMethod:       r.Method,
			RequestTime:      localTime(now),
			RequestTimeEpoch: now.UnixMilli(),
			APIID:            "local",
		},
	}
	ev.Body, ev.IsBase64Encoded = requestBody(r, body)
	return ev
}

// writeREST writes a proxy integration's response: where a header is in both maps, the
// multi-value one wins, as API Gateway merges them.
func writeREST(w http.ResponseWriter, resp *events.APIGatewayProxyResponse) {
	if resp.StatusCode == 0 { // a malformed proxy response
		restFailure(w, false)
		return
	}
	writeBody(w, resp.StatusCode, resp.Body, resp.IsBase64Encoded, func(h http.Header) {
		for k, v := range resp.Headers {
			h.Set(k, v)
		}
		for k, vs := range resp.MultiValueHeaders {
			h.Del(k)
			for _, v := range vs {
				h.Add(k, v)
			}
		}
	}, func() { restFailure(w, false) })
}

func restFailure(w http.ResponseWriter, timedOut bool) {
	if timedOut {
		writeMessage(w, http.StatusGatewayTimeout, "application/json", `{"message": "Endpoint request timed out"}`)
		return
	}
	writeMessage(w, http.StatusBadGateway, "application/json", `{"message": "Internal server error"}`)
}

// localTargetGroup is the target group ARN of the local load balancer's events.
const localTargetGroup = "arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/local/0000000000000000"

// albEvent builds the event a load balancer target group without multi-value headers
// sends for r: the last value of a repeated header or query parameter, and the query
// parameters as they were sent, not decoded.
func albEvent(r *http.Request, body []byte, _ string, _ time.Time) events.ALBTargetGroupRequest {
	headers := make(map[string]string, len(r.Header)+1)
	for name, values := range r.Header {
		headers[strings.ToLower(name)] = values[len(values)-1]
	}
	headers["host"] = r.Host
	var query map[string]string
	for _, pair := range strings.Split(r.URL.RawQuery, "&") {
		if pair == "" {
			continue
		}
		if query == nil {
			query = map[string]string{}
		}
		k, v, _ := strings.Cut(pair, "=")
		query[k] = v
	}
	ev := events.ALBTargetGroupRequest{
		HTTPMethod:            r.Method,
		Path:                  r.URL.EscapedPath(),
		QueryStringParameters: query,
		Headers:               headers,
		RequestContext:        events.ALBTargetGroupRequestContext{ELB: events.ELBContext{TargetGroupArn: localTargetGroup}},
	}
	ev.Body, ev.IsBase64Encoded = requestBody(r, body)
	return ev
}

// writeALB writes a target's response as a load balancer without multi-value headers
// does: from its single-value headers.
func writeALB(w http.ResponseWriter, resp *events.ALBTargetGroupResponse) {
	if resp.StatusCode == 0 {
		albFailure(w, false)
		return
	}
	writeBody(w, resp.StatusCode, resp.Body, resp.IsBase64Encoded, func(h http.Header) {
		for k, v := range resp.Headers {
			h.Set(k, v)
		}
	}, func() { albFailure(w, false) })
}

// albFailure answers a failed target with the load balancer's own page.
func albFailure(w http.ResponseWriter, timedOut bool) {
	status := "502 Bad Gateway"
	code := http.StatusBadGateway
	if timedOut {
		status, code = "504 Gateway Time-out", http.StatusGatewayTimeout
	}
	writeMessage(w, code, "text/html",
		"<html>\r\n<head><title>"+status+"</title></head>\r\n<body>\r\n<center><h1>"+status+"</h1></center>\r\n</body>\r\n</html>\r\n")
}
