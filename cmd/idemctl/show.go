package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/termtext"
)

// show prints the record of one key.
func (a *app) show(ctx context.Context, args []string) error {
	c := newCommand("show")
	k := c.keyFlags()
	if err := a.parse(c, args); err != nil {
		return err
	}
	_, rec, _, err := a.lookup(ctx, c, k)
	if err != nil {
		return err
	}
	return a.print(c, newView(rec, a.now()))
}

// lookup resolves the key, reads its record and returns it with the item as stored. No
// record is an error wrapping errNotFound.
func (a *app) lookup(ctx context.Context, c *command, k *keyFlags) (*table, *idemstore.Record, map[string]types.AttributeValue, error) {
	key, err := k.resolve()
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := a.open(ctx, c)
	if err != nil {
		return nil, nil, nil, err
	}
	rec, item, err := t.read(ctx, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read %s from table %s: %w", termtext.Display(key), termtext.Display(t.name), err)
	}
	if rec == nil {
		return nil, nil, nil, hinted{
			err:  fmt.Errorf("%w: no record under %s in table %s", errNotFound, termtext.Display(key), termtext.Display(t.name)),
			hint: k.notFoundHint(key),
		}
	}
	return t, rec, item, nil
}

// notFoundHint says, after no record was found under key, what the key was made of and
// what to try next. It never holds the raw key.
func (k *keyFlags) notFoundHint(key string) string {
	scope, operation := splitPrefix(key[:strings.IndexByte(key, '#')])
	var lines []string
	if k.storedKey != "" {
		lines = append(lines, fmt.Sprintf("Looked under the stored key as given: scope %s, operation %s.", termtext.Display(scope), termtext.Display(operation)))
	} else {
		lines = append(lines,
			fmt.Sprintf("Looked under scope %s, operation %s, tenant %s (the raw key is not printed).", termtext.Display(scope), termtext.Display(operation), orNone(k.tenant)),
			"Check: the scope is the function's name unless the guard sets idem.WithScope;",
			"       the operation is the name given to idem.New;",
			"       the HTTP wrappers scope the key of an authenticated caller by its identity (--tenant sub:…, iam:arn:…).")
	}
	return strings.Join(append(lines,
		`Try:   idemctl find --key "$KEY" [--tenant T]   the key under every scope and operation (a Scan)`,
		"       idemctl list --scope "+termtext.Display(scope)+"   the scope's in-progress records (a Scan)",
		"Exit code 3: if the key is right and so are these, there is no record and the next request runs."), "\n")
}

// print writes v as text or JSON.
func (a *app) print(c *command, v view) error {
	if c.json {
		return writeJSON(a, v)
	}
	if err := v.write(a.stdout, a.now()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// writeJSON writes v as one indented JSON document on stdout, with every character a
// terminal could obey escaped ([escapeJSON]).
func writeJSON(a *app, v any) error {
	doc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return a.say(string(termtext.EscapeJSON(doc)) + "\n")
}
