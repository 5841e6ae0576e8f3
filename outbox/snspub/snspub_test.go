package snspub_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pubbatch"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/snspub"
)

// The SDK's client satisfies the publisher's interface.
var _ snspub.API = (*sns.Client)(nil)

// fakeSNS is an SNS endpoint: it decodes the query-protocol PublishBatch requests the real
// client sends, records them, and answers with entries it fails by event id.
type fakeSNS struct {
	mu    sync.Mutex
	calls []url.Values
	fail  map[string]bool // event ids (the Idempotency-Key attribute) to fail
	down  bool            // answer every call with a 500
}

func (f *fakeSNS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "PublishBatch" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Form)
	if f.down {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `<ErrorResponse><Error><Type>Receiver</Type><Code>InternalError</Code><Message>down</Message></Error></ErrorResponse>`)
		return
	}
	var ok, failed strings.Builder
	for _, e := range entries(r.Form) {
		if f.fail[e.attrs[outbox.IDAttribute]] {
			fmt.Fprintf(&failed, `<member><Id>%s</Id><Code>InternalError</Code><Message>try again</Message><SenderFault>false</SenderFault></member>`, e.id)
		} else {
			fmt.Fprintf(&ok, `<member><Id>%s</Id><MessageId>sns-%s</MessageId></member>`, e.id, e.id)
		}
	}
	fmt.Fprintf(w, `<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult>`+
		`<Successful>%s</Successful><Failed>%s</Failed></PublishBatchResult>`+
		`<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishBatchResponse>`, ok.String(), failed.String())
}

// entry is one PublishBatch entry as decoded from the form.
type entry struct {
	id, message, group, dedup string
	attrs                     map[string]string // name: data type "/" value, or value for String
}

func entries(form url.Values) []entry {
	var out []entry
	for i := 1; ; i++ {
		p := fmt.Sprintf("PublishBatchRequestEntries.member.%d.", i)
		if form.Get(p+"Id") == "" {
			return out
		}
		e := entry{id: form.Get(p + "Id"), message: form.Get(p + "Message"), group: form.Get(p + "MessageGroupId"),
			dedup: form.Get(p + "MessageDeduplicationId"), attrs: map[string]string{}}
		for j := 1; form.Get(fmt.Sprintf("%sMessageAttributes.entry.%d.Name", p, j)) != ""; j++ {
			a := fmt.Sprintf("%sMessageAttributes.entry.%d.", p, j)
			v := form.Get(a + "Value.StringValue")
			if dt := form.Get(a + "Value.DataType"); dt != "String" {
				v = dt + "/" + v
			}
			e.attrs[form.Get(a+"Name")] = v
		}
		out = append(out, e)
	}
}

// client returns a real SNS client talking to f.
func client(t *testing.T, f *fakeSNS) *sns.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return sns.New(sns.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: aws.AnonymousCredentials{},
	})
}

func msg(i int, topic string) outbox.Message {
	return outbox.Message{
		OutboxEvent: outbox.Event{Destination: topic, OrderingKey: fmt.Sprintf("acct-%d", i), Type: "Paid",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"tenant": "t1"}},
		ID: fmt.Sprintf("id-%d", i),
	}
}

const (
	fifo = "arn:aws:sns:eu-west-1:123456789012:orders.fifo"
	std  = "arn:aws:sns:eu-west-1:123456789012:audit"
)

// TestPublishShapes: 12 messages to a FIFO topic and one to a standard topic go out as
// three calls (10 + 2 + 1), each message with its id, type and headers as String
// attributes; FIFO messages carry group = ordering key and deduplication id = event id.
func TestPublishShapes(t *testing.T) {
	t.Parallel()
	var msgs []outbox.Message
	for i := range 12 {
		msgs = append(msgs, msg(i, fifo))
	}
	msgs = append(msgs, msg(12, std))
	msgs[12].Payload = nil
	f := &fakeSNS{}
	errs := snspub.New(client(t, f)).Publish(context.Background(), msgs)
	assert.Equal(t, make([]error, 13), errs)
	require.Len(t, f.calls, 3)
	assert.Len(t, entries(f.calls[0]), 10)
	assert.Equal(t, fifo, f.calls[1].Get("TopicArn"))
	assert.Equal(t, std, f.calls[2].Get("TopicArn"))

	e := entries(f.calls[1])[1] // msgs[11]
	assert.Equal(t, entry{id: "m1", message: `{"n":11}`, group: "acct-11", dedup: "id-11", attrs: map[string]string{
		outbox.IDAttribute: "id-11", snspub.TypeAttribute: "Paid", "tenant": "t1",
	}}, e)

	s := entries(f.calls[2])[0]
	assert.Empty(t, s.group, "a standard topic has no groups")
	assert.Empty(t, s.dedup)
	assert.Equal(t, "{}", s.message, "SNS refuses an empty message")
}

// TestPublishFailures: an entry SNS lists as failed fails alone, and its ordering key's
// next message is held back; a call that fails fails all its messages.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	msgs := []outbox.Message{msg(0, std), msg(1, std), msg(2, std), msg(3, std)}
	msgs[3].OrderingKey = msgs[1].OrderingKey
	f := &fakeSNS{fail: map[string]bool{"id-1": true}}
	errs := snspub.New(client(t, f)).Publish(context.Background(), msgs)
	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], "InternalError")
	assert.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], pubbatch.ErrHeld)
	assert.Len(t, f.calls, 1, "the held message is not sent")

	down := &fakeSNS{down: true}
	for _, err := range snspub.New(client(t, down)).Publish(context.Background(), msgs[:3]) {
		assert.ErrorContains(t, err, "InternalError")
	}
}

// TestPublishBytes: PublishBatch carries at most 256 KiB, so three 100 KiB messages go
// out as two calls.
func TestPublishBytes(t *testing.T) {
	t.Parallel()
	var msgs []outbox.Message
	for i := range 3 {
		m := msg(i, std)
		m.Payload = []byte(`"` + strings.Repeat("x", 100<<10) + `"`)
		msgs = append(msgs, m)
	}
	f := &fakeSNS{}
	assert.Equal(t, make([]error, 3), snspub.New(client(t, f)).Publish(context.Background(), msgs))
	require.Len(t, f.calls, 2)
	assert.Len(t, entries(f.calls[0]), 2)
}
