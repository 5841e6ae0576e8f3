package main

import (
	"crypto/md5" //nolint:gosec // SQS's md5OfBody is an MD5 digest; nothing here relies on it
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// body is the payload of every event and message: 256 × 'x'.
var body = strings.Repeat("x", 256)

// queueARN is the event source of the SQS records: a standard (not FIFO) queue.
const queueARN = "arn:aws:sqs:us-east-1:123456789012:idem-bench"

// event is the invocation event of W1–W3.
type event struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

// response is what the handler returns, and a replay hands back.
type response struct {
	OK bool   `json:"ok"`
	ID string `json:"id"`
}

// uuid4 returns a random (version 4) UUID in its canonical form.
func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func newEvents(n int) []event {
	evs := make([]event, n)
	for i := range evs {
		evs[i] = event{ID: uuid4(), Body: body}
	}
	return evs
}

// newSQSEvent returns a batch of n fresh messages shaped like those Lambda receives from a
// standard queue.
func newSQSEvent(n int) events.SQSEvent {
	sum := md5.Sum([]byte(body)) //nolint:gosec // see import
	md5OfBody := hex.EncodeToString(sum[:])
	sent := strconv.FormatInt(time.Now().UnixMilli(), 10)
	recs := make([]events.SQSMessage, n)
	for i := range recs {
		var handle [96]byte
		_, _ = rand.Read(handle[:])
		recs[i] = events.SQSMessage{
			MessageId:     uuid4(),
			ReceiptHandle: "AQEB" + base64.StdEncoding.EncodeToString(handle[:]),
			Body:          body,
			Md5OfBody:     md5OfBody,
			Attributes: map[string]string{
				"ApproximateReceiveCount":          "1",
				"SentTimestamp":                    sent,
				"SenderId":                         "AIDAIENQZJOLO23YVJ4VO",
				"ApproximateFirstReceiveTimestamp": sent,
			},
			MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSource:       "aws:sqs",
			EventSourceARN:    queueARN,
			AWSRegion:         "us-east-1",
		}
	}
	return events.SQSEvent{Records: recs}
}

func newSQSEvents(batches, size int) []events.SQSEvent {
	evs := make([]events.SQSEvent, batches)
	for i := range evs {
		evs[i] = newSQSEvent(size)
	}
	return evs
}
