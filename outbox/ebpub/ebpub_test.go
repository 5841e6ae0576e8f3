package ebpub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/awsjsontest"
	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/ebpub"
)

// The SDK's client satisfies the publisher's interface.
var _ ebpub.API = (*eventbridge.Client)(nil)

// putEvents is a PutEvents request as the wire carries it.
type putEvents struct {
	Entries []struct {
		EventBusName, Source, DetailType, Detail string
		Time                                     float64
	}
}

// fakeEventBridge answers PutEvents, failing the entries whose event id is in fail, or
// every call with err.
func fakeEventBridge(t *testing.T, fail map[string]bool, err error) (*awsjsontest.Server, *eventbridge.Client) {
	t.Helper()
	srv := awsjsontest.Start(t, "AWSEvents.PutEvents", func(body []byte) (any, error) {
		if err != nil {
			return nil, err
		}
		var in putEvents
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, err
		}
		out := map[string]any{}
		var entries []map[string]string
		failed := 0
		for i, e := range in.Entries {
			var env outbox.Envelope
			if err := json.Unmarshal([]byte(e.Detail), &env); err != nil {
				return nil, err
			}
			if fail[env.IdempotencyKey] {
				failed++
				entries = append(entries, map[string]string{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"})
			} else {
				entries = append(entries, map[string]string{"EventId": fmt.Sprintf("eb-%d", i)})
			}
		}
		out["Entries"], out["FailedEntryCount"] = entries, failed
		return out, nil
	})
	return srv, eventbridge.New(eventbridge.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1, Credentials: aws.AnonymousCredentials{},
	})
}

func calls(t *testing.T, srv *awsjsontest.Server) []putEvents {
	t.Helper()
	var out []putEvents
	for _, b := range srv.Bodies() {
		var in putEvents
		require.NoError(t, json.Unmarshal(b, &in))
		out = append(out, in)
	}
	return out
}

var recorded = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func msg(i int, bus string) outbox.Message {
	return outbox.Message{
		OutboxEvent: outbox.Event{Destination: bus, OrderingKey: fmt.Sprintf("acct-%d", i), Type: "Paid",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"tenant": "t1"}},
		ID: fmt.Sprintf("id-%d", i), RecordedAt: recorded,
	}
}

// TestPublishShapes: 11 messages to one bus and one to another go out as three calls
// (10 + 1 + 1); each entry's detail is the message's envelope (event id, type, ordering
// key, headers, payload), its detail type the event type, its source the publisher's or
// the message's SourceHeader, its time the recording time.
func TestPublishShapes(t *testing.T) {
	t.Parallel()
	const orders, audit = "orders", "arn:aws:events:eu-west-1:123456789012:event-bus/audit"
	var msgs []outbox.Message
	for i := range 11 {
		msgs = append(msgs, msg(i, orders))
	}
	msgs = append(msgs, msg(11, audit))
	msgs[11].Headers = map[string]string{ebpub.SourceHeader: "com.example.audit"}
	srv, client := fakeEventBridge(t, nil, nil)
	pub, err := ebpub.New(client, ebpub.WithSource("com.example.orders"))
	require.NoError(t, err)
	assert.Equal(t, make([]error, 12), pub.Publish(context.Background(), msgs))

	got := calls(t, srv)
	require.Len(t, got, 3)
	assert.Len(t, got[0].Entries, 10)
	e := got[1].Entries[0] // msgs[10]
	assert.Equal(t, orders, e.EventBusName)
	assert.Equal(t, "com.example.orders", e.Source)
	assert.Equal(t, "Paid", e.DetailType)
	assert.InDelta(t, float64(recorded.Unix()), e.Time, 0.001)
	assert.JSONEq(t, `{"idempotencyKey":"id-10","type":"Paid","orderingKey":"acct-10","headers":{"tenant":"t1"},"payload":{"n":10}}`, e.Detail)

	a := got[2].Entries[0]
	assert.Equal(t, audit, a.EventBusName)
	assert.Equal(t, "com.example.audit", a.Source, "the message's source header wins")
}

// TestPublishFailures: an entry EventBridge answers with an error code fails alone (the
// results are matched by position), and its ordering key's next message is held back; a
// call that fails fails all its messages.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	msgs := []outbox.Message{msg(0, "b"), msg(1, "b"), msg(2, "b"), msg(3, "b")}
	msgs[3].OrderingKey = msgs[1].OrderingKey
	srv, client := fakeEventBridge(t, map[string]bool{"id-1": true}, nil)
	pub, err := ebpub.New(client)
	require.NoError(t, err)
	errs := pub.Publish(context.Background(), msgs)
	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], "InternalFailure")
	assert.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], pubbatch.ErrHeld)
	assert.Len(t, srv.Bodies(), 1, "the held message is not sent")
	assert.Equal(t, ebpub.DefaultSource, calls(t, srv)[0].Entries[0].Source)

	_, down := fakeEventBridge(t, nil, errors.New("down"))
	pub, err = ebpub.New(down)
	require.NoError(t, err)
	for _, err := range pub.Publish(context.Background(), msgs[:3]) {
		assert.ErrorContains(t, err, "InternalFailure")
	}
}

// TestPublishBytes: PutEvents carries at most 256 KiB, so three 100 KiB events go out as
// two calls.
func TestPublishBytes(t *testing.T) {
	t.Parallel()
	var msgs []outbox.Message
	for i := range 3 {
		m := msg(i, "b")
		m.Payload = []byte(`"` + strings.Repeat("x", 100<<10) + `"`)
		msgs = append(msgs, m)
	}
	srv, client := fakeEventBridge(t, nil, nil)
	pub, err := ebpub.New(client)
	require.NoError(t, err)
	assert.Equal(t, make([]error, 3), pub.Publish(context.Background(), msgs))
	got := calls(t, srv)
	require.Len(t, got, 2)
	assert.Len(t, got[0].Entries, 2)
}

// TestWithSource refuses an empty source and AWS's own.
func TestWithSource(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "aws.s3"} {
		_, err := ebpub.New(nil, ebpub.WithSource(s))
		assert.ErrorIs(t, err, idem.ErrInvalidOption, "%q", s)
	}
}
