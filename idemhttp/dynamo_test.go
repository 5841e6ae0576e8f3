package idemhttp_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/dynamo/dynamotest"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/ddblocal"
)

// TestDynamoDB: the middleware on the DynamoDB store (DynamoDB Local): concurrent
// duplicates run the handler once and get 409 with Retry-After, the retry is replayed byte
// for byte (a header value that is not UTF-8 included), the key reused with another body is 422, and a 5xx is not stored.
func TestDynamoDB(t *testing.T) {
	t.Parallel()
	ddblocal.SkipShort(t)
	store := dynamotest.NewStore(t)
	held := newHold()
	h := &counter{answer: func(n int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		held.wait()
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("Content-Disposition", "attachment; filename=\"caf\xe9.json\"") // obs-text
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"run":%d,"pad":%q}`, n, strings.Repeat("x", 3000)) // compressed when stored
	}}
	srv := serve(t, newGuard(t, store), h)

	got, dups := held.duplicates(t, srv.URL+"/orders", "k-1", `{"sku":"A"}`, 4)
	checkInProgress(t, dups)
	assert.Equal(t, http.StatusCreated, got.status)

	replay := send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{ "sku": "A" }`)
	assert.Equal(t, got.dump, strings.Replace(replay.dump, "Idempotent-Replayed: true\r\n", "", 1))
	assert.Equal(t, []string{"a=1", "b=2"}, replay.header.Values("Set-Cookie"))
	checkProblem(t, send(t, http.MethodPost, srv.URL+"/orders", "k-1", `{"sku":"B"}`), http.StatusUnprocessableEntity, idemhttp.ProblemKeyReused)
	assert.Equal(t, int64(1), h.runs.Load())

	for range 2 {
		assert.Equal(t, http.StatusBadGateway, send(t, http.MethodPost, srv.URL+"/fail", "k-2", "").status)
	}
	assert.Equal(t, int64(3), h.runs.Load(), "the 502 ran twice")
}
