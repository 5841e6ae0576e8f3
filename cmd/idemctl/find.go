package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/internal/termtext"
)

// maxPrefixesShown is how many key prefixes find names before it only counts the rest.
const maxPrefixesShown = 20

// finding is what find prints with --json. It never holds the raw key.
type finding struct {
	Records []match `json:"records"`
	Tenant  string  `json:"tenant"`
	// Prefixes are the distinct "<scope>.<operation>" of the stored keys the Scan read.
	Prefixes []string `json:"prefixes"`
	// Scanned is how many items the Scan read; ScanUnits what they cost, when DynamoDB says.
	Scanned   int32    `json:"scanned"`
	ScanUnits *float64 `json:"scan_read_units,omitempty"`
	// Reads is how many GetItem calls read the records found; ReadUnits what they cost.
	Reads     int      `json:"get_items"`
	ReadUnits *float64 `json:"get_read_units,omitempty"`
}

// match is a record find found, with the scope and operation its stored key names.
type match struct {
	Scope     string `json:"scope"`
	Operation string `json:"operation"`
	view
}

// find finds the records of a raw key (and tenant) under every scope and operation in the
// table. A stored key is "<scope>.<operation>#<hash of tenant and key>", so it Scans the
// table's keys, computes for each distinct "<scope>.<operation>" the stored key the raw
// key would have under it, and reads each one that exists with a GetItem.
func (a *app) find(ctx context.Context, args []string) error {
	c := newCommand("find")
	var key, tenant, scope, operation string
	c.fs.StringVar(&key, "key", "", "the caller's raw idempotency key")
	c.fs.StringVar(&tenant, "tenant", "", `the tenant the key was scoped by, as the wrapper derived it ("sub:…", "iam:arn:…")`)
	c.fs.StringVar(&scope, "scope", "", "only stored keys of this scope")
	c.fs.StringVar(&operation, "operation", "", "with --scope: only stored keys of this operation")
	if err := a.parse(c, args); err != nil {
		return err
	}
	if key == "" {
		return usageError("find: name the key with --key (and --tenant, if the wrapper scoped it by the caller)")
	}
	if _, err := storedKey("scope", "operation", tenant, key); err != nil {
		return err // a bad key, said before anything is read
	}
	prefix, err := keyPrefix(scope, operation)
	if err != nil {
		return err
	}
	t, err := a.open(ctx, c)
	if err != nil {
		return err
	}
	out, err := a.search(ctx, t, prefix, tenant, key)
	if err != nil {
		return err
	}
	if len(out.Records) == 0 {
		if c.json {
			if err := writeJSON(a, out); err != nil {
				return err
			}
		}
		return hinted{
			err: fmt.Errorf("%w: no record of the key with tenant %s under any of the %d key prefix(es) in table %s",
				errNotFound, orNone(tenant), len(out.Prefixes), termtext.Display(t.name)),
			hint: findHint(out, t.name),
		}
	}
	if c.json {
		return writeJSON(a, out)
	}
	for i, m := range out.Records {
		sep := ""
		if i > 0 {
			sep = "\n"
		}
		if err := a.say(fmt.Sprintf("%sscope        %s\noperation    %s\n", sep, termtext.Display(m.Scope), termtext.Display(m.Operation))); err != nil {
			return err
		}
		if err := m.write(a.stdout, a.now()); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	a.note("found %d record(s) of the key (tenant %s) under %d key prefix(es): %s\n%s\n",
		len(out.Records), orNone(tenant), len(out.Prefixes), prefixList(out.Prefixes), cost(out, t.name))
	return nil
}

// search Scans the stored keys (those starting with prefix, if given) and reads the record
// of key and tenant under each "<scope>.<operation>" met.
func (a *app) search(ctx context.Context, t *table, prefix, tenant, key string) (finding, error) {
	candidates := map[string]string{} // "<scope>.<operation>" → the stored key of key under it
	var found []string
	out := finding{Records: []match{}, Tenant: tenant, Prefixes: []string{}}
	in := t.keysInput(prefix)
	for {
		page, err := t.api.Scan(ctx, in)
		if err != nil {
			return finding{}, fmt.Errorf("scan table %s: %w", termtext.Display(t.name), err)
		}
		out.Scanned += page.ScannedCount
		if cc := page.ConsumedCapacity; cc != nil && cc.CapacityUnits != nil {
			out.ScanUnits = aws.Float64(aws.ToFloat64(out.ScanUnits) + *cc.CapacityUnits)
		}
		for _, item := range page.Items {
			s, ok := item[t.keyAttr()].(*types.AttributeValueMemberS)
			if !ok {
				continue
			}
			// The scope and operation hold no '#': the prefix ends at the first one. (The
			// item of a result kept apart, "<key>#result#<token>", has its record's.)
			p, _, ok := strings.Cut(s.Value, "#")
			if !ok {
				continue // not a stored key of idem's
			}
			want, seen := candidates[p]
			if !seen {
				want = candidate(p, tenant, key)
				candidates[p] = want
				out.Prefixes = append(out.Prefixes, p)
			}
			if want != "" && s.Value == want {
				found = append(found, want)
			}
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	slices.Sort(out.Prefixes)
	slices.Sort(found)
	now := a.now()
	for _, k := range found {
		rec, _, err := t.readCounted(ctx, k, &out)
		if err != nil {
			return finding{}, fmt.Errorf("read %s from table %s: %w", termtext.Display(k), termtext.Display(t.name), err)
		}
		if rec == nil {
			continue // deleted since the Scan
		}
		scope, operation := splitPrefix(k[:strings.IndexByte(k, '#')])
		out.Records = append(out.Records, match{Scope: scope, Operation: operation, view: newView(rec, now)})
	}
	return out, nil
}

// candidate returns the stored key of key and tenant under prefix "<scope>.<operation>",
// or "" if prefix names no scope and operation a guard could have.
func candidate(prefix, tenant, key string) string {
	scope, operation := splitPrefix(prefix)
	if scope == "" {
		return ""
	}
	sk, err := storedKey(scope, operation, tenant, key)
	if err != nil {
		return ""
	}
	return sk
}

// splitPrefix splits a stored key's prefix "<scope>.<operation>" into its scope and
// operation: the operation holds no '.', the scope may. It returns "", "" if there is no
// '.'.
func splitPrefix(prefix string) (scope, operation string) {
	i := strings.LastIndexByte(prefix, '.')
	if i < 0 {
		return "", ""
	}
	return prefix[:i], prefix[i+1:]
}

// keysInput returns the Scan of the table's keys (those starting with prefix, if given),
// reading the key attribute only. A Scan costs the size of every item it reads, whatever
// it returns.
func (t *table) keysInput(prefix string) *dynamodb.ScanInput {
	names := map[string]string{"#key": t.keyAttr()}
	values := map[string]types.AttributeValue{}
	var filter []string
	if t.sortKey != "" {
		names["#pk"] = t.attrs.ID
		values[":pk"] = &types.AttributeValueMemberS{Value: t.partition}
		filter = append(filter, "#pk = :pk")
	}
	if prefix != "" {
		values[":prefix"] = &types.AttributeValueMemberS{Value: prefix}
		filter = append(filter, "begins_with(#key, :prefix)")
	}
	in := &dynamodb.ScanInput{
		TableName:                aws.String(t.name),
		ProjectionExpression:     aws.String("#key"),
		ExpressionAttributeNames: names,
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	}
	if len(filter) > 0 {
		in.FilterExpression = aws.String(strings.Join(filter, " AND "))
		in.ExpressionAttributeValues = values
	}
	return in
}

// prefixList names the prefixes, at most maxPrefixesShown of them.
func prefixList(prefixes []string) string {
	if len(prefixes) == 0 {
		return "none"
	}
	shown := make([]string, 0, min(len(prefixes), maxPrefixesShown))
	for _, p := range prefixes[:min(len(prefixes), maxPrefixesShown)] {
		shown = append(shown, termtext.Display(p))
	}
	s := strings.Join(shown, ", ")
	if n := len(prefixes) - len(shown); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// cost says what find read and what it cost.
func cost(f finding, table string) string {
	units := func(u *float64, n int) string {
		switch {
		case u != nil:
			return fmt.Sprintf("%g read units", *u)
		case n == 0:
			return "0 read units"
		}
		return "read units not reported"
	}
	return fmt.Sprintf("scanned %d item(s) of table %s (%s), then read %d record(s) (%s)",
		f.Scanned, termtext.Display(table), units(f.ScanUnits, int(f.Scanned)), f.Reads, units(f.ReadUnits, f.Reads))
}

// findHint says, after a find found nothing, what it looked at and what to check.
func findHint(f finding, table string) string {
	lines := []string{
		cost(f, table) + ".",
		"Key prefixes (<scope>.<operation>) in the table: " + prefixList(f.Prefixes) + ".",
	}
	if len(f.Prefixes) == 0 {
		lines = append(lines, "The table holds no idem records: check --table (or IDEMPOTENCY_TABLE), the region and --endpoint.")
	}
	lines = append(lines,
		"The stored key hashes the tenant with the key: a request that lambdawrap's HTTP wrappers took",
		"from an authenticated caller is scoped by its identity; pass it with --tenant (sub:…, iam:arn:…).",
		"Else there is no record of this key: it expired, or no request with it reached its claim; the next request runs.")
	return strings.Join(lines, "\n")
}
