package lambdawrap_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/lambdawrap"
)

// TestAbortedRunReleasesTheKey: a handler whose context ends (the invocation's deadline,
// or the lease watchdog under a WithMaxLease below it) and that returns a zero response,
// one without a status, gave up: it did not answer. Nothing is stored, the key is released,
// and the answer is 503 ProblemAborted with Retry-After, so the retry runs the handler
// again. Stored, the zero response would be replayed for the whole expiry window.
func TestAbortedRunReleasesTheKey(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, store idemstore.Store, ev *event) {
		for _, tc := range []struct {
			name string
			opts []idem.Option
			// ctx returns the first invocation's context, and what the handler calls when
			// it starts, to end it.
			ctx func(t testing.TB) (context.Context, func())
		}{
			// The invocation's context ends while the handler runs (as at its deadline; a
			// cancellation, so that no claim races a timer).
			{name: "invocation context ends", ctx: func(t testing.TB) (context.Context, func()) {
				return context.WithCancel(invokeCtx(t))
			}},
			// The shortest lease (1 s), within a 10 s invocation: the watchdog ends the
			// handler's context.
			{name: "lease watchdog", opts: []idem.Option{idem.WithMaxLease(10 * time.Millisecond),
				idem.WithLeaseMargin(10 * time.Millisecond)}, ctx: func(t testing.TB) (context.Context, func()) {
				return invokeCtx(t), func() {}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var runs atomic.Int64
				ctx, end := tc.ctx(t)
				h := giveUpHandler(t, ev.kind, newGuard(t, store, tc.opts...), &runs, end)
				first := invoke(ctx, t, h, ev)
				require.NoError(t, first.err)
				checkProblem(t, first, 503, lambdawrap.ProblemAborted)
				assert.Equal(t, "1", first.header("Retry-After"))

				retry := invoke(invokeCtx(t), t, h, ev)
				require.NoError(t, retry.err)
				assert.Equal(t, 201, retry.code, "the retry runs again")
				assert.Empty(t, retry.header(lambdawrap.ReplayedHeader))
				assert.Equal(t, int64(2), runs.Load())
			})
		}
	})
}

// giveUpHandler returns the decorated handler of kind k whose first run calls end, waits
// for the end of its context and returns a zero response, and whose later runs answer 201.
func giveUpHandler(t *testing.T, k kind, g *idem.Guard, runs *atomic.Int64, end func()) lambda.Handler {
	t.Helper()
	gaveUp := func(ctx context.Context) bool {
		if runs.Add(1) > 1 {
			return false
		}
		end()
		<-ctx.Done()
		return true
	}
	var (
		h   any
		err error
	)
	switch k {
	case kindREST:
		h, err = lambdawrap.REST(g, func(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			if gaveUp(ctx) {
				return events.APIGatewayProxyResponse{}, nil
			}
			return events.APIGatewayProxyResponse{StatusCode: 201}, nil
		})
	case kindHTTPAPI:
		h, err = lambdawrap.HTTPAPI(g, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			if gaveUp(ctx) {
				return events.APIGatewayV2HTTPResponse{}, nil
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
	case kindFunctionURL:
		h, err = lambdawrap.FunctionURL(g, func(ctx context.Context, _ events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			if gaveUp(ctx) {
				return events.LambdaFunctionURLResponse{}, nil
			}
			return events.LambdaFunctionURLResponse{StatusCode: 201}, nil
		})
	case kindALB:
		h, err = lambdawrap.ALB(g, func(ctx context.Context, _ events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			if gaveUp(ctx) {
				return events.ALBTargetGroupResponse{}, nil
			}
			return events.ALBTargetGroupResponse{StatusCode: 201}, nil
		}, lambdawrap.WithTenant(albTenant))
	}
	require.NoError(t, err)
	return invoker{h: h}
}
