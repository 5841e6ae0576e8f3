package lambdawrap_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// TestWithRefused: a handler answers 201, but the store refuses its attached write for
// good. With WithRefused the author's problem (422) is the answer, stored and replayed, so
// the retry does not run the handler again; without it, 409 ProblemAttachedWriteFailed
// and a retry runs again.
func TestWithRefused(t *testing.T) {
	t.Parallel()
	errCurrency := errors.New("unsupported currency")
	for _, mapped := range []bool{true, false} {
		t.Run(map[bool]string{true: "Mapped", false: "Default"}[mapped], func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			handler := func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.Add(1)
				if err := idem.Attach(ctx, func() error { return errCurrency }); err != nil {
					return events.APIGatewayV2HTTPResponse{}, err
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"payment":"p-1"}`}, nil
			}
			var opts []lambdawrap.HTTPAPIOption
			if mapped {
				opts = append(opts, lambdawrap.WithRefused(func(_ context.Context, err error) (lambdawrap.Problem, bool) {
					return lambdawrap.Problem{Status: 422, Type: "https://example.com/problems/unsupported-currency", Detail: "currency not supported"},
						errors.Is(err, errCurrency)
				}))
			}
			h, err := lambdawrap.HTTPAPI(newGuard(t, memstore.New()), handler, opts...)
			require.NoError(t, err)
			ev := loadEvent(t, "apigw-v2-post-with-key")
			for i := range 2 {
				r := invoke(invokeCtx(t), t, invoker{h: h}, ev)
				require.NoError(t, r.err)
				assert.Equal(t, "application/problem+json", r.header("Content-Type"))
				if mapped {
					assert.Equal(t, 422, r.code)
					assert.JSONEq(t, `{"type":"https://example.com/problems/unsupported-currency","title":"Unprocessable Entity","status":422,"detail":"currency not supported"}`, r.body(t))
					assert.Equal(t, i == 1, r.header(lambdawrap.ReplayedHeader) == "true")
				} else {
					assert.Equal(t, 409, r.code)
					assert.Equal(t, lambdawrap.ProblemAttachedWriteFailed, r.problem(t)["type"])
				}
			}
			assert.Equal(t, map[bool]int64{true: 1, false: 2}[mapped], runs.Load())
		})
	}
}
