// Package awsjsontest is a fake AWS endpoint of the JSON protocols, 1.0 (SQS) and 1.1
// (EventBridge, Kinesis), for tests that check what the real SDK client sends: it decodes
// each request of one operation and answers what the test's handler returns.
package awsjsontest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server answers the requests of one operation, whose X-Amz-Target is target; it records
// their bodies. It is safe for concurrent use.
type Server struct {
	// URL is the endpoint, for the client's BaseEndpoint.
	URL string

	mu     sync.Mutex
	bodies [][]byte
	handle func(body []byte) (any, error)
}

// Start starts a Server for operation target (such as "AWSEvents.PutEvents") answering
// with handle: its value as JSON, or with its error as a 500 InternalFailure (which the
// client returns as an error). The server stops when the test ends.
func Start(t *testing.T, target string, handle func(body []byte) (any, error)) *Server {
	t.Helper()
	s := &Server{handle: handle}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		ct := r.Header.Get("Content-Type")
		if err != nil || r.Header.Get("X-Amz-Target") != target || (ct != "application/x-amz-json-1.0" && ct != "application/x-amz-json-1.1") {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		w.Header().Set("Content-Type", ct)
		out, err := s.handle(body)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": "InternalFailure", "message": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Bodies returns the request bodies received so far, in order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}
