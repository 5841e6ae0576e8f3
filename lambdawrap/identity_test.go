package lambdawrap_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lambdawrap"
	"github.com/idemkit/idem/memstore"
)

// TestStoredKeyIsOneForEveryFormOfTheKey: the handler's idem.StoredKey, the id it derives
// downstream keys from, is one for a key sent as an RFC 8941 quoted string ("k-1"), with
// parameters ("k-1";v=1) and bare (k-1), on the HTTP API and the REST decorators alike.
// Another key has another.
// The handler answers 500, so the key is released and every request runs it.
func TestStoredKeyIsOneForEveryFormOfTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		invoke func(t *testing.T, g *idem.Guard, key string) string // the handler's StoredKey
	}{
		{"HTTPAPI", func(t *testing.T, g *idem.Guard, key string) string {
			var seen string
			h, err := lambdawrap.HTTPAPI(g, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				seen = idem.StoredKey(ctx)
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusInternalServerError}, nil
			})
			require.NoError(t, err)
			resp, err := h(identityCtx(t), events.APIGatewayV2HTTPRequest{
				RawPath: "/payments",
				Headers: map[string]string{"Idempotency-Key": key},
				Body:    `{"amount":1250}`,
				RequestContext: events.APIGatewayV2HTTPRequestContext{
					HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/payments"},
				},
			})
			require.NoError(t, err)
			require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the handler ran")
			return seen
		}},
		{"REST", func(t *testing.T, g *idem.Guard, key string) string {
			var seen string
			h, err := lambdawrap.REST(g, func(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				seen = idem.StoredKey(ctx)
				return events.APIGatewayProxyResponse{StatusCode: http.StatusInternalServerError}, nil
			})
			require.NoError(t, err)
			resp, err := h(identityCtx(t), events.APIGatewayProxyRequest{
				HTTPMethod: http.MethodPost,
				Path:       "/payments",
				Resource:   "/payments",
				Headers:    map[string]string{"Idempotency-Key": key},
				Body:       `{"amount":1250}`,
			})
			require.NoError(t, err)
			require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the handler ran")
			return seen
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := idem.New(memstore.New(), "charge")
			require.NoError(t, err)
			quoted := tc.invoke(t, g, `"k-1"`)
			bare := tc.invoke(t, g, "k-1")
			withParams := tc.invoke(t, g, `"k-1";v=1`)
			other := tc.invoke(t, g, "k-2")
			require.NotEmpty(t, quoted)
			assert.Equal(t, quoted, bare, `"k-1" and k-1 are one request`)
			assert.Equal(t, quoted, withParams, `"k-1";v=1 and "k-1" are one request`)
			assert.NotEqual(t, quoted, other)
			assert.NotContains(t, quoted, "k-1", "the raw key never shows")
		})
	}
}

// identityCtx is an invocation's context, with a deadline as Lambda gives it.
func identityCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
