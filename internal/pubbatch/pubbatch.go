// Package pubbatch is what the outbox publishers (outbox/sqspub, outbox/snspub,
// outbox/ebpub, outbox/kinesispub) share: cutting a relay's messages into the broker's
// batch calls and mapping each call's outcome back to the messages, one error each.
//
// Every call holds messages of one destination and at most one message per ordering key;
// a key's next message goes in a later call, and only once its previous one was
// published. So per-key order holds whatever order a broker applies a call's entries in
// and however it fails part of a call: a message that failed holds back its key's later
// messages (they are reported failed, not sent), and the relay sends them again after it.
package pubbatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idem/outbox"
)

// ErrHeld is wrapped by the error of a message that was not sent because an earlier
// message of its ordering key failed in the same Publish.
var ErrHeld = errors.New("not sent: an earlier message of its ordering key failed")

// errOutcomes fails the messages of a call whose Send returned outcomes of another length.
var errOutcomes = errors.New("publisher returned outcomes for another number of messages")

// Batcher cuts messages into calls and sends them. Its fields are set by the publisher
// that owns it and never change; it is safe for concurrent use if Send is.
type Batcher struct {
	// Name prefixes the errors Publish makes ("snspub").
	Name string
	// MaxEntries is the broker's limit of messages per call; at least 1.
	MaxEntries int
	// MaxBytes is the broker's limit of bytes per call as Size counts them; 0 means none.
	// A message larger than MaxBytes goes alone, for the broker to refuse.
	MaxBytes int
	// MaxMessageBytes is the broker's limit of bytes per message as Size counts them,
	// where it is below MaxBytes and the broker refuses a call with a message over it as
	// a whole (Kinesis: 1 MiB per record); 0 means none. A message larger than it goes
	// alone, for the broker to refuse, so its call-mates do not fail with it.
	MaxMessageBytes int
	// Size returns what a message counts against MaxBytes; nil counts nothing.
	Size func(outbox.Message) int
	// Send sends msgs, all to dest, in one call. It returns one error per message (nil
	// for each one the broker accepted, and nil or an empty slice when it accepted all),
	// or err when the call failed as a whole (including an answer that was lost): then
	// every message of the call failed. Publish prefixes the errors with Name and dest.
	Send func(ctx context.Context, dest string, msgs []outbox.Message) (failed []error, err error)
}

// Publish sends msgs in calls as the package documentation says and returns one error per
// message, in the order of msgs: the [outbox.Publisher] contract.
func (b Batcher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	failedKeys := map[string]bool{}
	for len(pending) > 0 {
		var round []int
		round, pending = b.nextRound(msgs, pending, failedKeys, errs)
		for _, call := range b.calls(msgs, round) {
			b.send(ctx, msgs, call, errs)
			for _, i := range call {
				if errs[i] != nil {
					failedKeys[msgs[i].OrderingKey] = true
				}
			}
		}
	}
	return errs
}

// nextRound takes from pending the first message of each ordering key, failing (with
// [ErrHeld]) those whose key failed before, and returns them and what is left.
func (b Batcher) nextRound(msgs []outbox.Message, pending []int, failedKeys map[string]bool, errs []error) (round, rest []int) {
	inRound := map[string]bool{}
	for _, i := range pending {
		k := msgs[i].OrderingKey
		switch {
		case failedKeys[k]:
			errs[i] = fmt.Errorf("%s: %w", b.Name, ErrHeld)
		case inRound[k]:
			rest = append(rest, i)
		default:
			inRound[k] = true
			round = append(round, i)
		}
	}
	return round, rest
}

// calls cuts round into calls: by destination in order of first appearance, then at
// MaxEntries messages and MaxBytes bytes.
func (b Batcher) calls(msgs []outbox.Message, round []int) [][]int {
	byDest := map[string][]int{}
	var dests []string
	for _, i := range round {
		d := msgs[i].Destination
		if _, ok := byDest[d]; !ok {
			dests = append(dests, d)
		}
		byDest[d] = append(byDest[d], i)
	}
	var out [][]int
	for _, d := range dests {
		var call []int
		bytes := 0
		for _, i := range byDest[d] {
			n := 0
			if b.Size != nil {
				n = b.Size(msgs[i])
			}
			if b.MaxMessageBytes > 0 && n > b.MaxMessageBytes {
				out = append(out, []int{i}) // alone: the broker refuses it, and only it
				continue
			}
			full := len(call) == b.MaxEntries || (b.MaxBytes > 0 && bytes+n > b.MaxBytes)
			if len(call) > 0 && full {
				out = append(out, call)
				call, bytes = nil, 0
			}
			call = append(call, i)
			bytes += n
		}
		if len(call) > 0 {
			out = append(out, call)
		}
	}
	return out
}

// send sends msgs[call] in one call and sets errs of those that failed.
func (b Batcher) send(ctx context.Context, msgs []outbox.Message, call []int, errs []error) {
	batch := make([]outbox.Message, len(call))
	for n, i := range call {
		batch[n] = msgs[i]
	}
	dest := batch[0].Destination
	failed, err := b.Send(ctx, dest, batch)
	if err == nil && len(failed) != 0 && len(failed) != len(call) {
		err = errOutcomes
	}
	for n, i := range call {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("%s: send to %s: %w", b.Name, dest, err)
		case len(failed) > 0 && failed[n] != nil:
			errs[i] = fmt.Errorf("%s: send to %s: %w", b.Name, dest, failed[n])
		}
	}
}

// Attributes returns the attributes a message carries where the broker has message
// attributes (SQS, SNS): its headers, its ID under [outbox.IDAttribute] and its type
// under typeAttr. A header whose value is empty is left out: SQS and SNS refuse an empty
// attribute value, on every attempt, and a consumer reads a header that is absent as
// empty.
func Attributes(m outbox.Message, typeAttr string) map[string]string {
	attrs := make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		if v != "" {
			attrs[k] = v
		}
	}
	attrs[outbox.IDAttribute] = m.ID
	attrs[typeAttr] = m.Type
	return attrs
}

// ErrNoOutcome fails a message the broker's answer says nothing of: it counts as
// published only when the broker says so.
var ErrNoOutcome = errors.New("no outcome in the answer")

// EntryID is the id of a call's n-th entry, for brokers whose answer names entries by id
// (SQS, SNS); [EntryIndex] reads it back.
func EntryID(n int) string { return "m" + strconv.Itoa(n) }

// EntryIndex returns the index [EntryID] made id from, and whether id is one of a call of
// count entries.
func EntryIndex(id string, count int) (int, bool) {
	s, ok := strings.CutPrefix(id, "m")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 0 || n >= count || EntryID(n) != id {
		return 0, false
	}
	return n, true
}

// EntryError is a broker's error for one entry: its code and message.
func EntryError(code, message *string) error {
	return fmt.Errorf("%s: %s", deref(code), deref(message))
}

// ByPosition returns the outcomes of a call of count entries whose answer lists one
// result per entry, in order (EventBridge, Kinesis): result(i) is the i-th result's error
// code and message, a nil code for an entry accepted. Entries beyond the results fail
// with [ErrNoOutcome].
func ByPosition(count, results int, result func(i int) (code, message *string)) []error {
	errs := make([]error, count)
	for i := range errs {
		if i >= results {
			errs[i] = ErrNoOutcome
			continue
		}
		if code, msg := result(i); code != nil {
			errs[i] = EntryError(code, msg)
		}
	}
	return errs
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// maxGroupID is the longest message group id SQS and SNS FIFO take.
const maxGroupID = 128

// GroupID returns the message group id of a FIFO queue or topic for an ordering key: the
// key itself when SQS and SNS take it (1 to 128 characters, each an ASCII letter, digit
// or punctuation mark), else "sha256-" and the key's SHA-256 in hex. So each ordering key
// has one group of its own, and a key the brokers would refuse (a space, a non-ASCII
// letter, over 128 characters) is not refused on every attempt.
func GroupID(key string) string {
	if validGroupID(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// validGroupID reports whether SQS and SNS take s as a message group id.
func validGroupID(s string) bool {
	if s == "" || len(s) > maxGroupID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' { // printable ASCII but the space: letters, digits, punctuation
			return false
		}
	}
	return true
}
