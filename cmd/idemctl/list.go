package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/termtext"
)

// defaultLimit is how many records list prints unless --limit says otherwise.
const defaultLimit = 100

// listing is what list prints with --json.
type listing struct {
	Records []view `json:"records"`
	// Scanned is how many items the Scan read; ReadUnits what they cost, when DynamoDB says.
	Scanned   int32    `json:"scanned"`
	ReadUnits *float64 `json:"read_units,omitempty"`
	// More is true when --limit stopped the Scan before the end of the table.
	More bool `json:"more"`
}

// list prints the in-progress records: those whose lease runs and those whose lease ended
// with nobody retrying, except the tombstone a release leaves without a checkpoint (the
// key is free, as when a release deleted the record). It is a Scan of the whole table,
// paginated, filtered to in-progress records (of one scope, or one operation of it, with
// --scope and --operation).
func (a *app) list(ctx context.Context, args []string) error {
	c := newCommand("list")
	var scope, operation, want string
	limit := defaultLimit
	c.fs.StringVar(&scope, "scope", "", "only records of this scope")
	c.fs.StringVar(&operation, "operation", "", "with --scope: only records of this operation")
	c.fs.StringVar(&want, "state", "all", "in-progress (lease running), lease-ended (nobody retried), or all")
	c.fs.IntVar(&limit, "limit", defaultLimit, "print at most this many records, then stop scanning")
	if err := a.parse(c, args); err != nil {
		return err
	}
	switch {
	case want != stateLeaseRunning && want != stateLeaseEnded && want != "all":
		return usageError("--state %q: want in-progress, lease-ended or all", want)
	case limit < 1:
		return usageError("--limit must be at least 1")
	}
	prefix, err := keyPrefix(scope, operation)
	if err != nil {
		return err
	}
	t, err := a.open(ctx, c)
	if err != nil {
		return err
	}
	out, err := a.scan(ctx, t, prefix, want, limit)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(a, out)
	}
	if err := writeList(a.stdout, out.Records, a.now()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	more := ""
	if out.More {
		more = fmt.Sprintf("; stopped at --limit %d, more may follow", limit)
	}
	units := ""
	if out.ReadUnits != nil {
		units = fmt.Sprintf(", %g read units", *out.ReadUnits)
	}
	a.note("%d record(s); scanned %d item(s)%s%s\n", len(out.Records), out.Scanned, units, more)
	return nil
}

// released reports whether rec is the tombstone a release left (see idemstore.Store): its
// token is an idemstore.ReleasedToken.
func released(rec *idemstore.Record) bool {
	return strings.HasPrefix(rec.LeaseToken, idemstore.ReleasedToken(""))
}

// scan pages through the table until it has limit records in the wanted state or the
// table ends.
func (a *app) scan(ctx context.Context, t *table, prefix, want string, limit int) (listing, error) {
	in := t.scanInput(prefix)
	out := listing{Records: []view{}}
	for {
		page, err := t.api.Scan(ctx, in)
		if err != nil {
			return listing{}, fmt.Errorf("scan table %s: %w", termtext.Display(t.name), err)
		}
		out.Scanned += page.ScannedCount
		if cc := page.ConsumedCapacity; cc != nil && cc.CapacityUnits != nil {
			out.ReadUnits = aws.Float64(aws.ToFloat64(out.ReadUnits) + *cc.CapacityUnits)
		}
		now := a.now()
		for i, item := range page.Items {
			rec, err := t.decode(ctx, item)
			if err != nil {
				return listing{}, fmt.Errorf("scan table %s: %w", termtext.Display(t.name), err)
			}
			v := newView(rec, now)
			if v.State != stateLeaseRunning && v.State != stateLeaseEnded && v.State != stateHeld {
				continue // expired: counts as absent
			}
			if released(rec) && rec.Checkpoint == "" {
				continue // the tombstone of a release: nothing waits on it, the next request runs
			}
			if want != "all" && v.State != want && !(want == stateLeaseRunning && v.State == stateHeld) {
				continue
			}
			out.Records = append(out.Records, v)
			if len(out.Records) == limit {
				out.More = i < len(page.Items)-1 || page.LastEvaluatedKey != nil
				return out, nil
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// scanInput returns the Scan of the in-progress records (whose key starts with prefix, if
// given), reading the attributes list shows and not the stored results.
func (t *table) scanInput(prefix string) *dynamodb.ScanInput {
	a := &t.attrs
	names := map[string]string{
		"#status": a.Status, "#key": t.keyAttr(), "#lease": a.InProgressExpiration,
		"#token": a.LeaseToken, "#cp": a.Checkpoint, "#exp": a.Expiration, "#v": a.Version,
		"#enc": a.Encoding, "#fp": a.Validation,
	}
	values := map[string]types.AttributeValue{
		":inprogress": &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)},
	}
	filter := []string{"#status = :inprogress"}
	if t.sortKey != "" {
		names["#pk"] = a.ID
		values[":pk"] = &types.AttributeValueMemberS{Value: t.partition}
		filter = append(filter, "#pk = :pk")
	}
	if prefix != "" {
		values[":prefix"] = &types.AttributeValueMemberS{Value: prefix}
		filter = append(filter, "begins_with(#key, :prefix)")
	}
	projection := "#key, #status, #lease, #token, #cp, #exp, #v, #enc, #fp"
	if t.sortKey != "" {
		projection += ", #pk"
	}
	return &dynamodb.ScanInput{
		TableName:                 aws.String(t.name),
		FilterExpression:          aws.String(strings.Join(filter, " AND ")),
		ProjectionExpression:      aws.String(projection),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	}
}
