package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCredit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    credit
		invalid bool
	}{
		{name: "valid", body: `{"account_id":"acct-1","amount_cents":1000}`, want: credit{AccountID: "acct-1", AmountCents: 1000}},
		{name: "keys in any order", body: `{ "amount_cents": 5, "account_id": "a" }`, want: credit{AccountID: "a", AmountCents: 5}},
		{name: "empty", body: ``, invalid: true},
		{name: "not JSON", body: `credit acct-1`, invalid: true},
		{name: "amount as string", body: `{"account_id":"a","amount_cents":"5"}`, invalid: true},
		{name: "fractional amount", body: `{"account_id":"a","amount_cents":1.5}`, invalid: true},
		{name: "zero amount", body: `{"account_id":"a","amount_cents":0}`, invalid: true},
		{name: "negative amount", body: `{"account_id":"a","amount_cents":-1}`, invalid: true},
		{name: "amount too large", body: `{"account_id":"a","amount_cents":100000001}`, invalid: true},
		{name: "missing account", body: `{"amount_cents":5}`, invalid: true},
		{name: "unknown field", body: `{"account_id":"a","amount_cents":5,"memo":"x"}`, invalid: true},
		{name: "trailing data", body: `{"account_id":"a","amount_cents":5}{}`, invalid: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseCredit(tc.body)
			if tc.invalid {
				assert.ErrorIs(t, err, errInvalidCredit)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParseCredit feeds arbitrary bodies to the credit parser: it never panics, and what it
// accepts is within the limits.
func FuzzParseCredit(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "sqs-credits-with-duplicates.json"))
	require.NoError(f, err)
	var ev events.SQSEvent
	require.NoError(f, json.Unmarshal(data, &ev))
	for _, m := range ev.Records {
		f.Add(m.Body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c, err := parseCredit(body)
		if err != nil {
			assert.ErrorIs(t, err, errInvalidCredit)
			return
		}
		assert.NotEmpty(t, c.AccountID)
		assert.LessOrEqual(t, len(c.AccountID), maxAccountIDLength)
		assert.True(t, c.AmountCents >= 1 && c.AmountCents <= maxAmount)
	})
}
