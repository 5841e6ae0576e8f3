package esm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Outcome is what the poller made of one invocation.
type Outcome int

const (
	// Success means every record of the batch is done and the checkpoint moves past the batch.
	Success Outcome = iota
	// PartialFailure means a valid partial batch response named records of the batch; those
	// before the lowest named one are done.
	PartialFailure
	// FunctionError means the invocation failed (an error returned, a panic, a crash, a
	// timeout, a lost response or an injected failure).
	FunctionError
	// InvalidResponse means a partial batch response that Lambda treats as a complete failure
	// (an empty, null or unknown itemIdentifier), or one that is not a JSON object.
	InvalidResponse
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "Success"
	case PartialFailure:
		return "PartialFailure"
	case FunctionError:
		return "FunctionError"
	case InvalidResponse:
		return "InvalidResponse"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// partialResponse is the partial batch response of a stream handler
// (events.DynamoDBEventResponse, events.KinesisEventResponse), read loosely enough to tell
// a missing or null itemIdentifier from a string.
type partialResponse struct {
	BatchItemFailures []struct {
		ItemIdentifier json.RawMessage `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
}

// judge reads a successful invocation's response. With ReportBatchItemFailures off, the
// response is ignored. Otherwise it returns the outcome, the identifiers reported, and for
// a partial failure the index in batch of the record with the lowest reported sequence
// number.
func judge(report bool, out []byte, batch []Record) (outcome Outcome, ids []string, lowest int, reason string) {
	out = bytes.TrimSpace(out)
	if !report || len(out) == 0 || bytes.Equal(out, []byte("null")) {
		// AWS: a null or empty response is a complete success.
		return Success, nil, 0, ""
	}
	var resp partialResponse
	if out[0] != '{' {
		return InvalidResponse, nil, 0, "the response is not a JSON object"
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return InvalidResponse, nil, 0, "the response does not decode: " + err.Error()
	}
	if len(resp.BatchItemFailures) == 0 {
		// AWS: an empty or null batchItemFailures list is a complete success.
		return Success, nil, 0, ""
	}
	index := make(map[string]int, len(batch))
	for i, r := range batch {
		index[r.SequenceNumber] = i
	}
	lowest = len(batch)
	for _, f := range resp.BatchItemFailures {
		var id string
		raw := bytes.TrimSpace(f.ItemIdentifier)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			return InvalidResponse, ids, 0, "a null itemIdentifier"
		}
		if err := json.Unmarshal(raw, &id); err != nil {
			return InvalidResponse, ids, 0, "an itemIdentifier that is not a string"
		}
		ids = append(ids, id)
		if id == "" {
			return InvalidResponse, ids, 0, "an empty itemIdentifier"
		}
		i, ok := index[id]
		if !ok {
			return InvalidResponse, ids, 0, fmt.Sprintf("itemIdentifier %q is not a sequence number of the batch", id)
		}
		lowest = min(lowest, i)
	}
	return PartialFailure, ids, lowest, ""
}
