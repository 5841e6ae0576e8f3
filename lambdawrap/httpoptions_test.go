package lambdawrap_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/lambdawrap"
)

// TestHTTPOptions: an HTTP decorator refuses an invalid option, naming it. An option for
// another event shape does not compile (see options_test.go).
func TestHTTPOptions(t *testing.T) {
	t.Parallel()
	g := memGuard(t)
	a := &app{}
	tests := []struct {
		name string
		opts []lambdawrap.HTTPAPIOption
		want string
	}{
		{name: "no methods", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithMethods()}, want: "idem: invalid option: lambdawrap: WithMethods: must name at least one method"},
		{name: "bad method", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithMethods("PO ST")}, want: `idem: invalid option: lambdawrap: WithMethods: "PO ST" is not a method name`},
		{name: "bad header", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithHeader("Idempotency Key")}, want: `idem: invalid option: lambdawrap: WithHeader: "Idempotency Key" is not a header name`},
		{name: "nil cacheable", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithCacheable(nil)}, want: "idem: invalid option: lambdawrap: WithCacheable: must not be nil"},
		{name: "nil tenant", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithTenant[events.APIGatewayV2HTTPRequest](nil)},
			want: "idem: invalid option: lambdawrap: WithTenant: must not be nil"},
		{name: "bad JMESPath", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithFingerprintJMESPath[events.APIGatewayV2HTTPRequest]("body[")},
			want: "idem: invalid option: lambdawrap: WithFingerprintJMESPath: "},
		{name: "the first invalid option", opts: []lambdawrap.HTTPAPIOption{lambdawrap.WithMethods("POST"), lambdawrap.WithHeader(""), lambdawrap.WithCacheable(nil)},
			want: `idem: invalid option: lambdawrap: WithHeader: "" is not a header name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := lambdawrap.HTTPAPI(g, a.httpAPI, tc.opts...)
			require.ErrorIs(t, err, idem.ErrInvalidOption)
			assert.Nil(t, h)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := lambdawrap.REST(nil, a.rest)
	require.ErrorIs(t, err, idem.ErrInvalidOption)
	assert.EqualError(t, err, "idem: invalid option: lambdawrap: REST: guard and handler must not be nil")
	_, err = lambdawrap.ALB(g, nil)
	assert.EqualError(t, err, "idem: invalid option: lambdawrap: ALB: guard and handler must not be nil")
	_, err = lambdawrap.FunctionURL(g, a.functionURL, nil) // a nil option is skipped
	assert.NoError(t, err)
	var (
		noHTTP  lambdawrap.HTTPOption
		noEvent lambdawrap.Option[events.APIGatewayV2HTTPRequest]
	)
	_, err = lambdawrap.HTTPAPI(g, a.httpAPI, noHTTP, noEvent) // so are nil options of either type
	assert.NoError(t, err)
}

// TestMaxHeaderKeyLength: the header's limit has a name of its own, distinct from the guard's
// idem.MaxKeyLength, and the old name still compiles as an alias of it.
func TestMaxHeaderKeyLength(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 255, lambdawrap.MaxHeaderKeyLength)
	assert.Less(t, lambdawrap.MaxHeaderKeyLength, idem.MaxKeyLength, "a header key always fits the guard")
	assert.Equal(t, lambdawrap.MaxHeaderKeyLength, lambdawrap.MaxKeyLength)
}
