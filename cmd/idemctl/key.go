package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// keyFlags selects one record: by the caller's raw key (with the scope, operation and
// tenant it was guarded under) or by its stored key as the logs print it.
type keyFlags struct {
	scope     string
	operation string
	key       string
	tenant    string
	storedKey string
}

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

// usageError returns an error wrapping [errUsage] with the message format.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// resolve returns the stored key the flags name.
func (k *keyFlags) resolve() (string, error) {
	switch {
	case k.storedKey != "" && (k.key != "" || k.scope != "" || k.operation != "" || k.tenant != ""):
		return "", usageError("--stored-key names the record by itself: leave out --key, --scope, --operation and --tenant")
	case k.storedKey != "":
		if !strings.Contains(k.storedKey, "#") {
			return "", usageError("--stored-key %q is not a stored key (<scope>.<operation>#<sha256 hex>)", k.storedKey)
		}
		return k.storedKey, nil
	case k.key == "":
		return "", usageError("name the record with --key (and --scope, --operation) or with --stored-key")
	case k.scope == "":
		return "", usageError("--scope is required with --key: the guard's scope (by default the Lambda function's name)")
	case k.operation == "":
		return "", usageError("--operation is required with --key: the operation name given to idem.New")
	}
	return storedKey(k.scope, k.operation, k.tenant, k.key)
}

// storedKey returns the key under which a guard for operation with scope stores the
// request with the raw key and tenant: "<scope>.<operation>#<sha256 hex>". It builds an
// [idem.Guard] as a function would and asks it ([idem.Guard.StoredKey]), so the tool and
// the library cannot disagree on the scheme; this is the one place idemctl applies it.
func storedKey(scope, operation, tenant, key string) (string, error) {
	g, err := idem.New(memstore.New(), operation, idem.WithScope(scope))
	if err != nil {
		return "", usageError("--scope or --operation: %v", err)
	}
	sk, err := g.StoredKey(idem.Request{Key: key, Tenant: tenant})
	if err != nil {
		return "", usageError("--key: %v", err)
	}
	return sk, nil
}

// keyPrefix returns the prefix of the stored keys of scope (and operation, if given), for
// listing: "<scope>.<operation>#", or "<scope>." for every operation of the scope.
func keyPrefix(scope, operation string) (string, error) {
	if scope == "" {
		if operation != "" {
			return "", usageError("--operation needs --scope")
		}
		return "", nil
	}
	if operation == "" {
		return scope + ".", nil
	}
	// A stored key of the pair, less its hash.
	sk, err := storedKey(scope, operation, "", "x")
	if err != nil {
		return "", err
	}
	return sk[:strings.LastIndexByte(sk, '#')+1], nil
}
