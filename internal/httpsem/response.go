package httpsem

import "strings"

// Response is a response of any shape, and what the guard stores. Its JSON field names
// are those of the Lambda proxy integrations (as the Powertools utilities store an API
// Gateway handler's result); they are the stored format, so they do not change. Maps and
// slices have no omitempty, so a replay keeps nil apart from empty.
type Response struct {
	StatusCode        int                 `json:"statusCode"`
	StatusDescription string              `json:"statusDescription,omitempty"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`
	// MultiValueHeadersBase64 keeps the exact bytes of headers whose values are not all
	// UTF-8 (obs-text, RFC 9110 section 5.5: a Latin-1 file name, say), which a JSON string
	// cannot carry: for each such name, every value in order, base64-encoded (standard
	// encoding). They replace the name's values in MultiValueHeaders, which holds them as
	// JSON stores them (invalid bytes as U+FFFD) for a reader that predates this field;
	// records written before it have none, and replay as they were stored. Only idemhttp
	// writes and reads it: a Lambda response is JSON, so its header values are UTF-8.
	MultiValueHeadersBase64 map[string][]string `json:"multiValueHeadersBase64,omitempty"`
	// NotStored, set by a wrapper whose response reached the client as it was written
	// (streamed, or too large to hold), records the key as completed without a response:
	// the handler never runs again for the key, and a replay is answered as one of a
	// result too large to store (idem.ErrResultNotStored).
	NotStored bool `json:"notStored,omitempty"`
}

// markReplayed adds the replay header, in the map the integration reads.
func (r *Response) markReplayed(multi bool) {
	if multi || (r.Headers == nil && r.MultiValueHeaders != nil) {
		for k := range r.MultiValueHeaders {
			if strings.EqualFold(k, ReplayedHeader) {
				delete(r.MultiValueHeaders, k)
			}
		}
		if r.MultiValueHeaders == nil {
			r.MultiValueHeaders = make(map[string][]string, 1)
		}
		for k := range r.MultiValueHeadersBase64 {
			if strings.EqualFold(k, ReplayedHeader) {
				delete(r.MultiValueHeadersBase64, k)
			}
		}
		r.MultiValueHeaders[ReplayedHeader] = []string{"true"}
		return
	}
	for k := range r.Headers {
		if strings.EqualFold(k, ReplayedHeader) {
			delete(r.Headers, k)
		}
	}
	if r.Headers == nil {
		r.Headers = make(map[string]string, 1)
	}
	r.Headers[ReplayedHeader] = "true"
}
