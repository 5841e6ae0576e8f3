package lambdawrap_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/lambdawrap"
)

// FuzzEvents feeds arbitrary payloads, seeded with the fixtures in testdata, to each of the
// four decorators as the Lambda runtime would, twice. Whatever the event, nothing panics,
// the answer is one the semantics table allows, and a replay is the first response.
func FuzzEvents(f *testing.F) {
	for _, name := range fixtures(f) {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"httpMethod":"POST","headers":{"Idempotency-Key":"k"},"isBase64Encoded":true,"body":"!"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, k := range []kind{kindREST, kindHTTPAPI, kindFunctionURL, kindALB} {
			a := &app{}
			h := a.handler(t, k, memGuard(t))
			ctx := context.Background()
			out1, err1 := h.Invoke(ctx, payload)
			out2, err2 := h.Invoke(ctx, payload)
			if err1 != nil || err2 != nil {
				// Only a payload the runtime cannot decode fails the invocation.
				assert.Equal(t, int64(0), a.runs.Load())
				continue
			}
			r1 := decodeResponse(t, out1)
			r2 := decodeResponse(t, out2)
			assert.Contains(t, []int{201, 400}, r1.code, "first answer %s", out1)
			assert.LessOrEqual(t, a.runs.Load(), int64(2))
			if r2.header(lambdawrap.ReplayedHeader) == "true" {
				assert.Equal(t, int64(1), a.runs.Load())
				assert.Equal(t, r1.m, r2.withoutReplayHeader())
			}
		}
	})
}
