package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// MaxBatchStatements is how many PartiQL statements one BatchExecuteStatement call may
// carry. [Store.ClaimMany], [Store.CompleteMany] and [Store.ReleaseMany] make one call per
// this many records.
const MaxBatchStatements = 25

// ClaimMany implements [idemstore.BatchStore]: it claims each record as [Store.Claim]
// would, in as few round trips as the records allow:
//
//   - One BatchExecuteStatement call per [MaxBatchStatements] records inserts them with
//     PartiQL INSERT, which writes only where no item has the key.
//   - The keys already taken cost a second call, shared by up to 100 of them: a strongly
//     consistent BatchGetItem of their items. An item that would refuse the record's claim
//     (see [Store.Claim]) is the conflict, returned as prev, as a single claim returns it.
//   - Completed records whose results are kept apart (see [Store.Complete]) cost a third
//     call, shared by all of them: a BatchGetItem of the results' items.
//   - Any other outcome falls back to [Store.Claim] for that record alone, so takeovers
//     come back exactly as from a single claim. Such outcomes are an expired item, an
//     ended lease the claim may take over, an item that does not decode or has gone since,
//     and a statement that failed for another reason, such as throttling.
//
// A batch of new keys thus costs one call, a batch of replays two. A key released before
// (a failed message's redelivery) is taken by the tombstone its release left (see
// [Store.Release]). It costs the read and a PutItem of its own besides.
//
// A failed call fails each of its records with an error wrapping [idem.ErrStore]. A failed
// read of a result kept apart leaves the record that refused the claim in Prev as well,
// without its result, as [Store.Claim] does. The function's role needs the IAM actions
// dynamodb:PartiQLInsert and dynamodb:BatchGetItem on the table, besides those of
// [Store.Claim].
func (s *Store) ClaimMany(ctx context.Context, recs []*idemstore.Record, now time.Time) []idemstore.ClaimResult {
	out := make([]idemstore.ClaimResult, len(recs))
	stmts := make([]types.BatchStatementRequest, len(recs))
	for i, rec := range recs {
		stmts[i] = s.insertStatement(rec)
	}
	var taken, single []int
	for i, r := range s.execute(ctx, stmts) {
		switch {
		case r.callErr != nil:
			out[i].Err = s.fail("claim", r.callErr)
		case r.code == "":
			out[i].Claimed = true // nothing was there, so nothing was replaced
		case r.code == types.BatchStatementErrorCodeEnumDuplicateItem:
			taken = append(taken, i)
		default:
			single = append(single, i)
		}
	}
	if len(taken) > 0 {
		keys := make([]string, len(taken))
		for j, i := range taken {
			keys[j] = recs[i].Key
		}
		items, err := s.getMany(ctx, keys)
		var apart []int
		var refs []string
		for j, i := range taken {
			switch {
			case err != nil:
				// The insert met a record (DuplicateItem) that could not be read: say so
				// with the error, so that the guard never fails open over it.
				out[i].Prev, out[i].Err = metUnread(recs[i].Key), s.fail("claim", err)
			case items[j] == nil:
				single = append(single, i) // gone since, or left unprocessed: claim singly
			default:
				prev, ref := s.refusing(items[j], recs[i], now)
				if prev == nil {
					single = append(single, i)
					continue
				}
				out[i].Prev = prev
				if ref != "" {
					apart, refs = append(apart, i), append(refs, ref)
				}
			}
		}
		s.readResults(ctx, out, apart, refs)
	}
	for _, i := range single {
		out[i].Prev, out[i].Claimed, out[i].Err = s.Claim(ctx, recs[i], now)
	}
	return out
}

// readResults reads the results kept apart of the records out[i].Prev for i in idx, ref
// j naming the result's item of idx[j], with one BatchGetItem call per 100. A result's
// item left unprocessed is read alone. A result that could not be read leaves its record
// without it (Data nil) in Prev, with the error in Err, as [Store.Claim] returns it.
func (s *Store) readResults(ctx context.Context, out []idemstore.ClaimResult, idx []int, refs []string) {
	if len(idx) == 0 {
		return
	}
	items, err := s.getMany(ctx, refs)
	for j, i := range idx {
		switch {
		case err != nil:
			out[i].Err = s.fail("claim", err)
		case items[j] == nil:
			// Gone, or left unprocessed: one GetItem tells which.
			out[i].Err = s.readResult(ctx, "claim", out[i].Prev, refs[j])
		default:
			out[i].Err = s.setResult(out[i].Prev, items[j])
		}
	}
}

// refusing returns the record read back if it decodes and would refuse a claim of rec at
// now, else nil: the caller then claims singly, and the conditional PutItem decides.
// Judging a refusing record claimable therefore costs a round trip, never a wrong answer;
// the test ([idemstore.Record.ClaimableBy]) is the negation of claimExpr's condition, with
// the same rounding (see encodeEpoch): a decoded record has an empty checkpoint for an
// empty string as for none, and an empty fingerprint for none. It also returns the key of
// the record's result's item, if its result is kept apart: the record comes back without
// it.
func (s *Store) refusing(item map[string]types.AttributeValue, rec *idemstore.Record, now time.Time) (*idemstore.Record, string) {
	prev, ref, err := s.decodeItem(item)
	if err != nil {
		return nil, "" // a single claim reports it, or takes over an expired one
	}
	if prev.ClaimableBy(rec, now) {
		return nil, ""
	}
	return prev, ref
}

// CompleteMany implements [idemstore.BatchStore]: it completes each record as [Store.Complete]
// would without attached writes, with one BatchExecuteStatement call of PartiQL UPDATE
// statements per [MaxBatchStatements] records, each conditional on the record's lease
// token and on the record being in progress. Results kept apart (see [Store.Complete]) are
// written first, with one call of PartiQL INSERT statements per [MaxBatchStatements] of
// them. A record's answer:
//
//   - a failed condition: nil if the record is completed under its token already (a
//     resend), which is left as it is, so no completion under a token overwrites another;
//     else [idem.ErrLeaseLost]. The statement returns the record it met
//     (ReturnValuesOnConditionCheckFailure), so deciding costs no round trip;
//   - an item over DynamoDB's size limit: [idemstore.ErrTooLarge];
//   - a failed call: an error wrapping [idem.ErrStore];
//   - a statement that failed for another reason (throttling, say, or a result's item that
//     a resend already wrote): the answer of [Store.Complete], which retries it alone.
//
// The function's role needs the IAM actions dynamodb:PartiQLInsert and
// dynamodb:PartiQLUpdate on the table.
func (s *Store) CompleteMany(ctx context.Context, recs []*idemstore.Record) []error {
	out := make([]error, len(recs))
	refs, settled := s.putResults(ctx, recs, out)
	stmts := make([]types.BatchStatementRequest, 0, len(recs))
	var idx []int
	for i, rec := range recs {
		if settled[i] {
			continue
		}
		if rec.LeaseToken == "" {
			out[i] = errors.New("dynamo: complete: record has no lease token")
			continue
		}
		stmts = append(stmts, s.updateStatement(rec, refs[i]))
		idx = append(idx, i)
	}
	for j, r := range s.execute(ctx, stmts) {
		i := idx[j]
		switch {
		case r.callErr != nil:
			out[i] = s.fail("complete", r.callErr)
		case r.code == "":
		case r.code == types.BatchStatementErrorCodeEnumConditionalCheckFailed:
			if s.completedBy(r.item, recs[i]) {
				continue // completed under the token already: nothing is written twice
			}
			out[i] = fmt.Errorf("dynamo: complete: %w: %w", idem.ErrLeaseLost, r.err)
		case r.code == types.BatchStatementErrorCodeEnumValidationError && mentionsItemSize(&r.msg):
			out[i] = fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrTooLarge, r.err)
		default:
			out[i] = s.Complete(ctx, recs[i], nil)
		}
	}
	return out
}

// putResults writes the results of recs that are kept apart, before the completions that
// name them, and returns the keys of their items by record ("" for a result inline). It
// settles a record whose result could not be written (its error in out: an
// [idemstore.ErrTooLarge] for an item or key over DynamoDB's limits), and one whose
// INSERT failed for another reason, such as a result's item that a resend already wrote,
// by completing it alone with [Store.Complete] (its answer in out); settled reports which.
func (s *Store) putResults(ctx context.Context, recs []*idemstore.Record, out []error) (refs []string, settled []bool) {
	refs, settled = make([]string, len(recs)), make([]bool, len(recs))
	var stmts []types.BatchStatementRequest
	var idx []int
	for i, rec := range recs {
		ref, item := s.resultApart(rec)
		if item == nil {
			continue
		}
		if err := s.checkResultKey(ref); err != nil {
			out[i], settled[i] = err, true
			continue
		}
		refs[i] = ref
		stmts = append(stmts, insertItem(s.table, item))
		idx = append(idx, i)
	}
	for j, r := range s.execute(ctx, stmts) {
		i := idx[j]
		switch {
		case r.callErr != nil:
			out[i], settled[i] = s.fail("complete", r.callErr), true
		case r.code == "":
		case r.code == types.BatchStatementErrorCodeEnumValidationError && mentionsItemSize(&r.msg):
			out[i], settled[i] = fmt.Errorf("dynamo: complete: %w: %w", idemstore.ErrTooLarge, r.err), true
		default:
			out[i], settled[i] = s.Complete(ctx, recs[i], nil), true
		}
	}
	return refs, settled
}

// ReleaseMany implements [idemstore.BatchStore]: it releases each key as [Store.Release] would,
// keeping its record as a tombstone, with one BatchExecuteStatement call of PartiQL UPDATE
// statements per [MaxBatchStatements] keys, each conditional on the lease token and the
// in-progress status ([idem.ErrLeaseLost] when another owner holds the key, or nobody
// does). A statement that failed for another reason (throttling, say) is retried alone
// with [Store.Release]. The function's role needs the IAM action dynamodb:PartiQLUpdate
// on the table.
func (s *Store) ReleaseMany(ctx context.Context, keys, tokens []string, now time.Time) []error {
	out := make([]error, len(keys))
	if len(tokens) != len(keys) {
		for i := range out {
			out[i] = errors.New("dynamo: release: keys and tokens differ in number")
		}
		return out
	}
	stmts := make([]types.BatchStatementRequest, len(keys))
	for i := range keys {
		stmts[i] = s.releaseStatement(keys[i], tokens[i], now)
	}
	for i, r := range s.execute(ctx, stmts) {
		switch {
		case r.callErr != nil:
			out[i] = s.fail("release", r.callErr)
		case r.code == "":
		case r.code == types.BatchStatementErrorCodeEnumConditionalCheckFailed:
			out[i] = fmt.Errorf("dynamo: release: %w: %w", idem.ErrLeaseLost, r.err)
		default:
			out[i] = s.Release(ctx, keys[i], tokens[i], now)
		}
	}
	return out
}

// maxBatchGet is how many keys one BatchGetItem call may read.
const maxBatchGet = 100

// getMany reads the items of keys, strongly consistent, with one BatchGetItem call per
// [maxBatchGet] keys; item j belongs to key j, nil when there is none or DynamoDB left it
// unprocessed (the caller then goes to the single-item path, which has the SDK's retries).
func (s *Store) getMany(ctx context.Context, keys []string) ([]map[string]types.AttributeValue, error) {
	items := make([]map[string]types.AttributeValue, len(keys))
	keyAttr := s.cfg.attrs.ID
	if s.cfg.sortKey != "" {
		keyAttr = s.cfg.sortKey
	}
	for at := 0; at < len(keys); at += maxBatchGet {
		chunk := keys[at:min(at+maxBatchGet, len(keys))]
		index := make(map[string]int, len(chunk))
		req := make([]map[string]types.AttributeValue, len(chunk))
		for j, k := range chunk {
			index[k] = at + j
			req[j] = s.key(k)
		}
		out, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: req, ConsistentRead: aws.Bool(true)}},
		})
		if err != nil {
			return nil, err
		}
		for _, item := range out.Responses[s.table] {
			if k, ok := item[keyAttr].(*types.AttributeValueMemberS); ok {
				if j, ok := index[k.Value]; ok {
					items[j] = item
				}
			}
		}
	}
	return items, nil
}

// stmtResult is the outcome of one statement of a batch.
type stmtResult struct {
	// item is the item returned, or the one that failed the condition.
	item    map[string]types.AttributeValue
	code    types.BatchStatementErrorCodeEnum // the statement's error code; empty if it succeeded
	msg     string
	err     error // the statement's error, a *StatementError
	callErr error // the call carrying the statement failed
}

// maxConcurrentCalls bounds the calls of one large batch in flight at once.
const maxConcurrentCalls = 8

// execute runs stmts with one BatchExecuteStatement call per [MaxBatchStatements] and
// returns their results in order. The calls of a large batch run concurrently, up to
// maxConcurrentCalls at once, so that it costs about the latency of one call, not of one
// per chunk.
func (s *Store) execute(ctx context.Context, stmts []types.BatchStatementRequest) []stmtResult {
	res := make([]stmtResult, len(stmts))
	const size = MaxBatchStatements
	if len(stmts) == 0 {
		return res // no call: DynamoDB refuses an empty batch
	}
	if len(stmts) <= size {
		s.executeChunk(ctx, stmts, res)
		return res
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxConcurrentCalls)
	for at := 0; at < len(stmts); at += size {
		end := min(at+size, len(stmts))
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			s.executeChunk(ctx, stmts[at:end], res[at:end])
		}()
	}
	wg.Wait()
	return res
}

// executeChunk runs one BatchExecuteStatement call of stmts and puts their results in res.
func (s *Store) executeChunk(ctx context.Context, stmts []types.BatchStatementRequest, res []stmtResult) {
	out, err := s.client.BatchExecuteStatement(ctx, &dynamodb.BatchExecuteStatementInput{Statements: stmts})
	if err == nil && len(out.Responses) != len(stmts) {
		err = fmt.Errorf("dynamo: BatchExecuteStatement returned %d responses for %d statements", len(out.Responses), len(stmts))
	}
	for j := range stmts {
		r := &res[j]
		if err != nil {
			r.callErr = err
			continue
		}
		resp := &out.Responses[j]
		r.item = resp.Item
		if e := resp.Error; e != nil {
			r.code, r.msg = e.Code, aws.ToString(e.Message)
			r.err = &StatementError{Code: string(e.Code), Message: r.msg}
			r.item = e.Item // the item that failed the condition, where the statement asked for it
		}
	}
}

// StatementError is the failure of one PartiQL statement of a BatchExecuteStatement call,
// which reports errors per statement rather than as the call's error. It implements
// smithy.APIError, so code that inspects SDK errors with errors.As finds its code.
type StatementError struct {
	// Code is DynamoDB's error code, such as "ConditionalCheckFailed".
	Code string
	// Message is DynamoDB's message.
	Message string
}

// Error describes the failure.
func (e *StatementError) Error() string {
	return "dynamo: statement failed: " + e.Code + ": " + e.Message
}

// ErrorCode returns the code, for smithy.APIError.
func (e *StatementError) ErrorCode() string { return e.Code }

// ErrorMessage returns the message, for smithy.APIError.
func (e *StatementError) ErrorMessage() string { return e.Message }

// ErrorFault returns smithy.FaultUnknown, for smithy.APIError.
func (e *StatementError) ErrorFault() smithy.ErrorFault { return smithy.FaultUnknown }

var _ smithy.APIError = (*StatementError)(nil)

// insertStatement returns the PartiQL INSERT of rec's item, which fails with DuplicateItem
// when an item with its key exists.
func (s *Store) insertStatement(rec *idemstore.Record) types.BatchStatementRequest {
	return insertItem(s.table, s.encodeRecord(rec))
}

// insertItem returns the PartiQL INSERT of item into table, which fails with DuplicateItem
// when an item with its key exists.
func insertItem(table string, item map[string]types.AttributeValue) types.BatchStatementRequest {
	names := slices.Sorted(maps.Keys(item))
	params := make([]types.AttributeValue, len(names))
	var b strings.Builder
	b.WriteString("INSERT INTO " + quoteIdent(table) + " VALUE {")
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteString(name) + ": ?")
		params[i] = item[name]
	}
	b.WriteString("}")
	return types.BatchStatementRequest{Statement: aws.String(b.String()), Parameters: params}
}

// updateStatement returns the PartiQL UPDATE that completes rec (its result kept apart in
// the item ref, if not empty), conditional on its lease token and on the record being in
// progress, as [Store.Complete]'s: the statement form of [Store.completion], setting and
// removing the same attributes. A failed condition returns the record it met.
func (s *Store) updateStatement(rec *idemstore.Record, ref string) types.BatchStatementRequest {
	a := &s.cfg.attrs
	var b strings.Builder
	var params []types.AttributeValue
	b.WriteString("UPDATE " + quoteIdent(s.table))
	set := func(name string, v types.AttributeValue) {
		b.WriteString(" SET " + quoteIdent(name) + " = ?")
		params = append(params, v)
	}
	set(a.Status, &types.AttributeValueMemberS{Value: string(rec.Status)})
	set(a.Version, &types.AttributeValueMemberN{Value: strconv.Itoa(storedVersion(rec, ref))})
	remove := []string{a.InProgressExpiration}
	for _, o := range optionalValues(rec, ref) {
		if o.v == nil {
			remove = append(remove, a.attr(o.ph))
		} else {
			set(a.attr(o.ph), o.v)
		}
	}
	for _, name := range remove {
		b.WriteString(" REMOVE " + quoteIdent(name))
	}
	where, keyParams := s.whereKey(rec.Key)
	b.WriteString(" WHERE " + where + " AND " + quoteIdent(a.LeaseToken) + " = ? AND " + quoteIdent(a.Status) + " = ?")
	params = append(append(params, keyParams...), &types.AttributeValueMemberS{Value: rec.LeaseToken},
		&types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)})
	return types.BatchStatementRequest{
		Statement:                           aws.String(b.String()),
		Parameters:                          params,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// releaseStatement returns the PartiQL UPDATE that releases key's record as
// [Store.Release] does: its lease ended at now and its token replaced by
// [idemstore.ReleasedToken], conditional on token and on the record being in progress.
func (s *Store) releaseStatement(key, token string, now time.Time) types.BatchStatementRequest {
	a := &s.cfg.attrs
	where, keyParams := s.whereKey(key)
	params := []types.AttributeValue{
		encodeEpoch(now, leaseExpiryUnit), // as Release: rounded down
		&types.AttributeValueMemberS{Value: idemstore.ReleasedToken(token)},
	}
	params = append(append(params, keyParams...), &types.AttributeValueMemberS{Value: token},
		&types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)})
	return types.BatchStatementRequest{
		Statement: aws.String("UPDATE " + quoteIdent(s.table) +
			" SET " + quoteIdent(a.InProgressExpiration) + " = ? SET " + quoteIdent(a.LeaseToken) + " = ?" +
			" WHERE " + where + " AND " + quoteIdent(a.LeaseToken) + " = ? AND " + quoteIdent(a.Status) + " = ?"),
		Parameters: params,
	}
}

// whereKey returns the condition on the primary key of key's item and its parameters.
func (s *Store) whereKey(key string) (string, []types.AttributeValue) {
	if s.cfg.sortKey == "" {
		return quoteIdent(s.cfg.attrs.ID) + " = ?", []types.AttributeValue{&types.AttributeValueMemberS{Value: key}}
	}
	return quoteIdent(s.cfg.attrs.ID) + " = ? AND " + quoteIdent(s.cfg.sortKey) + " = ?", []types.AttributeValue{
		&types.AttributeValueMemberS{Value: s.cfg.partitionValue},
		&types.AttributeValueMemberS{Value: key},
	}
}

// quoteIdent quotes a table or attribute name for PartiQL, where a double-quoted identifier
// may hold any character and keywords (such as "status") must be quoted.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// quoteString quotes an attribute name as a PartiQL string literal, as the keys of an
// INSERT's VALUE tuple are written.
func quoteString(name string) string { return `'` + strings.ReplaceAll(name, `'`, `''`) + `'` }
