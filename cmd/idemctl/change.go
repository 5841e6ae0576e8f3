package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/termtext"
)

// action is a change idemctl can make to a record.
type action string

const (
	// actionRelease ends the lease of an in-progress record whose owner is known dead, so
	// that the next request takes the key over at once and resumes from its checkpoint.
	actionRelease action = "release"
	// actionDelete deletes a completed (or failed) record, so that the next request with
	// the key runs the handler again.
	actionDelete action = "delete"
)

// changed is what release and delete print with --json.
type changed struct {
	Action string `json:"action"`
	Record view   `json:"record"`
	Done   bool   `json:"done"`
}

// change shows the record, checks that the action applies, asks for confirmation and
// makes the change conditional on the record being as shown.
func (a *app) change(ctx context.Context, act action, args []string) error {
	c := newCommand(string(act))
	k := c.keyFlags()
	var yes bool
	var token string
	c.fs.BoolVar(&yes, "yes", false, "do it without asking (required when stdin is not a terminal)")
	c.fs.StringVar(&token, "token", "", "act only if the owner token starts with this prefix (as show printed it)")
	if err := a.parse(c, args); err != nil {
		return err
	}
	if !yes && !a.isTTY() {
		return usageError("%s changes the table: pass --yes, or run it on a terminal to confirm", act)
	}
	t, rec, item, err := a.lookup(ctx, c, k)
	if err != nil {
		return err
	}
	now := a.now()
	v := newView(rec, now)
	// What the change is conditional on is shown first; with --json, to stderr.
	shown := a.stdout
	if c.json {
		shown = a.stderr
	}
	if err := v.write(shown, now); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if err := applies(act, rec, v, token); err != nil {
		return err
	}
	warn(a, act, v)
	if !yes {
		if err := a.confirm(act); err != nil {
			return err
		}
	}
	if err := t.apply(ctx, act, item, a.now()); err != nil {
		return err
	}
	if c.json {
		return writeJSON(a, changed{Action: string(act), Record: v, Done: true})
	}
	return a.say(done(act, rec) + "\n")
}

// applies refuses an action that does not fit the record as shown.
func applies(act action, rec *idemstore.Record, v view, token string) error {
	if token != "" && !strings.HasPrefix(rec.LeaseToken, token) {
		return fmt.Errorf("%w: the owner token is %s, not %s…: the record is not the one you meant", errRefused, cut(v.OwnerToken), termtext.Display(token))
	}
	switch {
	case v.State == stateExpired:
		return fmt.Errorf("%w: the record has expired and already counts as absent: the next request runs", errRefused)
	case act == actionRelease && rec.Status != idemstore.StatusInProgress:
		return fmt.Errorf("%w: release ends the lease of an in-progress record; this one is %s (delete forgets a result)", errRefused, termtext.Display(string(rec.Status)))
	case act == actionRelease && v.State == stateLeaseEnded:
		return fmt.Errorf("%w: the lease has already ended: the next request with the key takes it over, nothing to release", errRefused)
	case act == actionDelete && rec.Status == idemstore.StatusInProgress:
		return fmt.Errorf("%w: the record is in progress; release a dead owner's lease instead of deleting it", errRefused)
	}
	return nil
}

// warn says what the action risks.
func warn(a *app, act action, v view) {
	switch {
	case act == actionRelease && v.State == stateLeaseRunning:
		a.note("\nThe owner's lease is still running. Release it only if the owner is known dead:\n" +
			"if it is alive, the next request runs the handler while it still does.\n")
	case act == actionDelete:
		a.note("\nAfter the delete, the next request with this key runs the handler again. A function\n" +
			"using idem.WithCache may still replay the result from a warm container until it expires.\n")
	}
}

// confirm asks on the terminal and accepts only "yes".
func (a *app) confirm(act action) error {
	a.note("\nType yes to %s this record: ", act)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("%w: not confirmed (%w); nothing was written", errRefused, err)
	}
	if strings.TrimSpace(line) != "yes" {
		return fmt.Errorf("%w: not confirmed; nothing was written", errRefused)
	}
	return nil
}

// apply makes the change, conditional on the item being as shown. A record that changed
// since is an error wrapping errRefused, and nothing is written.
func (t *table) apply(ctx context.Context, act action, shown map[string]types.AttributeValue, now time.Time) error {
	cond, names, values := t.unchanged(shown)
	var err error
	switch act {
	case actionRelease:
		// The lease ends now; the record, its checkpoint and fingerprint stay, so the next
		// request with the key takes it over (as after a crash) and resumes from the
		// checkpoint. The lease end is in epoch milliseconds, as dynamo stores it. The
		// owner's token is replaced, as the guard's own release does: an owner that was
		// hung, not dead, then has every heartbeat, checkpoint and completion refused
		// (ErrLeaseLost), instead of taking the lease back with its next beat.
		names["#end"] = t.attrs.InProgressExpiration
		names["#tok"] = t.attrs.LeaseToken
		values[":end"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)}
		values[":released"] = &types.AttributeValueMemberS{Value: idemstore.ReleasedToken(ownerToken(shown, t.attrs.LeaseToken))}
		_, err = t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(t.name),
			Key:                       t.primaryKey(shown),
			UpdateExpression:          aws.String("SET #end = :end, #tok = :released"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		})
	case actionDelete:
		_, err = t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 aws.String(t.name),
			Key:                       t.primaryKey(shown),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		})
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%w: the record changed since it was shown; nothing was written: show it again", errRefused)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", act, err)
	}
	return nil
}

// ownerToken returns the lease token of item as stored, "" if it has none.
func ownerToken(item map[string]types.AttributeValue, attr string) string {
	if s, ok := item[attr].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// done says what happened and what comes next.
func done(act action, rec *idemstore.Record) string {
	if act == actionDelete {
		return "Deleted: the next request with this key runs the handler again."
	}
	if rec.Checkpoint != "" {
		return "Released: the next request with this key takes it over and resumes from checkpoint " + strconv.Quote(rec.Checkpoint) + "."
	}
	return "Released: the next request with this key takes it over and runs the handler."
}
