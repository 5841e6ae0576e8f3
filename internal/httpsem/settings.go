package httpsem

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of the HTTP settings, re-exported by the public packages.
const (
	// DefaultHeader is the request header that carries the idempotency key.
	DefaultHeader = "Idempotency-Key"
	// ReplayedHeader is added, with the value "true", to every replayed response.
	ReplayedHeader = "Idempotent-Replayed"
	// MaxKeyLength is the longest idempotency key a header may carry, in characters
	// (bytes: keys are printable ASCII).
	MaxKeyLength = 255
)

// Retry-After values of responses whose wait is not known from a lease.
const (
	// StoreRetryAfter is the Retry-After of a 503 answered when the store fails.
	StoreRetryAfter = time.Second
	// LeaseLostRetryAfter is the Retry-After of a 409 answered when the lease was lost: the
	// other owner is already running and usually done soon.
	LeaseLostRetryAfter = time.Second
)

// DefaultMethods are the guarded methods: POST and PATCH. PUT and DELETE are idempotent by
// definition, and GET, HEAD and OPTIONS are safe.
func DefaultMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// DefaultCacheable reports whether a response with this status is stored and replayed:
// every status except 5xx, 409 and 429.
func DefaultCacheable(status int) bool {
	return status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests
}

// Settings are how requests are guarded, whatever their shape. The public packages'
// options set them through the Set methods, which refuse a bad value with an error
// wrapping idem.ErrInvalidOption and naming Package and the option.
type Settings struct {
	// Package names the public package: in option errors, log messages and problem
	// types ("https://pkg.go.dev/github.com/idemkit/idem/<Package>#Problem...").
	Package     string
	KeyRequired bool
	Methods     map[string]bool
	Cacheable   func(status int) bool
	Header      string
	// Refused chooses the answer to a request whose attached writes the store refused for
	// good; nil answers the default (409 ProblemAttachedWriteFailed, the key released).
	Refused func(ctx context.Context, err error) (Refusal, bool)
}

// DefaultSettings returns the defaults for the public package pkg.
func DefaultSettings(pkg string) Settings {
	return Settings{
		Package:     pkg,
		KeyRequired: true,
		Methods:     methodSet(DefaultMethods()),
		Cacheable:   DefaultCacheable,
		Header:      DefaultHeader,
	}
}

// SetMethods sets the guarded methods: at least one, each an HTTP token, matched
// case-insensitively.
func (s *Settings) SetMethods(methods []string) error {
	const name = "WithMethods"
	if len(methods) == 0 {
		return s.OptionError(name, "must name at least one method")
	}
	for _, m := range methods {
		if !isToken(m) {
			return s.OptionError(name, fmt.Sprintf("%q is not a method name", m))
		}
	}
	s.Methods = methodSet(methods)
	return nil
}

// SetCacheable sets which statuses are stored; cacheable must not be nil.
func (s *Settings) SetCacheable(cacheable func(status int) bool) error {
	if cacheable == nil {
		return s.OptionError("WithCacheable", "must not be nil")
	}
	s.Cacheable = cacheable
	return nil
}

// SetHeader sets the key's header; name must be a header name.
func (s *Settings) SetHeader(name string) error {
	if !isToken(name) {
		return s.OptionError("WithHeader", fmt.Sprintf("%q is not a header name", name))
	}
	s.Header = name
	return nil
}

// OptionError returns the error of an invalid option: it wraps idem.ErrInvalidOption and
// names the package and the option.
func (s *Settings) OptionError(option, msg string) error {
	return fmt.Errorf("%w: %s: %s: %s", idem.ErrInvalidOption, s.Package, option, msg)
}

func methodSet(methods []string) map[string]bool {
	m := make(map[string]bool, len(methods))
	for _, s := range methods {
		m[strings.ToUpper(s)] = true
	}
	return m
}

// isToken reports whether s is a non-empty HTTP token (RFC 9110, section 5.6.2), as method
// and header names must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
