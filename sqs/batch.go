package sqs

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idem"
)

// batch is the work of one invocation. Each message index belongs to exactly one unit, and
// only the goroutine running that unit touches the message's entries in out and state.
type batch struct {
	h     *Handler
	msgs  []events.SQSMessage
	out   []Outcome
	state []msgState
	fifo  bool

	deadline    time.Time
	hasDeadline bool
	margin      time.Duration

	// claims holds the keys claimed together (see claimAll); nil on the per-message path.
	// claimUsed marks the claims a message has run under; claim c belongs to the unit of
	// the messages with its key, so only that unit's goroutine touches claimUsed[c].
	claims    *idem.Batch
	claimUsed []bool
}

// msgState is what the batch knows of one message besides its outcome.
type msgState struct {
	key string
	fp  []byte
	// keyErr is set when the key or fingerprint could not be had.
	keyErr error
	// tried marks an outcome that came from the guard (or from a message whose outcome
	// did): the outcomes that later messages with the same key and fingerprint may share.
	tried bool
	// dupOf is the earlier message whose outcome this one took, or -1.
	dupOf int
	// claim is the index of the message's key in the batch's claims, or -1.
	claim int
}

func (h *Handler) newBatch(ctx context.Context, msgs []events.SQSMessage, start time.Time) *batch {
	b := &batch{
		h:      h,
		msgs:   msgs,
		out:    make([]Outcome, len(msgs)),
		state:  make([]msgState, len(msgs)),
		margin: h.cfg.margin,
	}
	b.deadline, b.hasDeadline = ctx.Deadline()
	if b.hasDeadline && !h.cfg.marginSet {
		// A fixed margin would starve a function whose whole timeout is shorter than it.
		b.margin = max(min(b.margin, b.deadline.Sub(start)/4), 0)
	}
	for i := range msgs {
		m, st := &msgs[i], &b.state[i]
		st.dupOf, st.claim = -1, -1
		b.fifo = b.fifo || isFIFO(m.EventSourceARN)
		b.out[i] = Outcome{MessageID: m.MessageId, GroupID: m.Attributes[attrGroupID]}
		st.key, st.keyErr = h.cfg.key(*m)
		if st.keyErr == nil {
			b.out[i].Key = st.key
			st.fp, st.keyErr = h.cfg.fingerprint(*m)
		}
	}
	return b
}

// isFIFO reports whether an event source ARN names a FIFO queue, whose names end in
// ".fifo". It is the only sign of a FIFO batch that the handler reads: a standard (fair)
// queue's messages may carry a MessageGroupId too.
func isFIFO(arn string) bool { return strings.HasSuffix(arn, ".fifo") }

// queueName returns the name of the queue msgs came from: the last part of the first
// record's event source ARN ("arn:aws:sqs:<region>:<account>:<name>"); "" without one. An
// event source mapping reads one queue, so every record names the same.
func queueName(msgs []events.SQSMessage) string {
	for _, m := range msgs {
		if m.EventSourceARN != "" {
			return m.EventSourceARN[strings.LastIndexByte(m.EventSourceARN, ':')+1:]
		}
	}
	return ""
}

// plan splits the batch into units, each processed in the event's order by one goroutine,
// different units concurrently. Messages that share a key are one unit, so they are never
// raced against each other and later ones can take an earlier one's outcome; on a FIFO
// queue, so are the messages of a group, to keep its order. A unit is thus a connected set
// of messages linked by key or group; units are ordered by their first message.
func (b *batch) plan() [][]int {
	n := len(b.msgs)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	union := func(i, j int) { // the root is always a unit's first message
		ri, rj := find(i), find(j)
		parent[max(ri, rj)] = min(ri, rj)
	}
	link := func(seen map[string]int, s string, i int) {
		if j, ok := seen[s]; ok {
			union(i, j)
		} else {
			seen[s] = i
		}
	}
	byKey := make(map[string]int, n)
	var byGroup map[string]int
	if b.fifo {
		byGroup = make(map[string]int)
	}
	for i, st := range b.state {
		if st.keyErr == nil {
			link(byKey, st.key, i)
		}
		if b.fifo {
			link(byGroup, b.out[i].GroupID, i)
		}
	}
	// Number the units in the order of their first message (a unit's root, its smallest
	// index, comes before its other messages), then lay them out in one slice.
	unitOf := make([]int, n)
	sizes := make([]int, 0, n)
	for i := range n {
		if r := find(i); r == i {
			unitOf[i] = len(sizes)
			sizes = append(sizes, 0)
		} else {
			unitOf[i] = unitOf[r]
		}
		sizes[unitOf[i]]++
	}
	flat := make([]int, n)
	units := make([][]int, len(sizes))
	at := 0
	for u, size := range sizes {
		units[u] = flat[at : at : at+size]
		at += size
	}
	for i, u := range unitOf {
		units[u] = append(units[u], i)
	}
	return units
}

// run processes the units on up to the configured number of goroutines and returns when
// all have finished. Every message checks ctx before it starts, so the workers stop
// starting work once ctx ends and finish with the messages they have started.
func (b *batch) run(ctx context.Context, units [][]int) {
	workers := min(b.h.cfg.concurrency, len(units))
	if workers <= 1 {
		for _, u := range units {
			b.runUnit(ctx, u)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(units) {
					return
				}
				b.runUnit(ctx, units[k])
			}
		}()
	}
	wg.Wait()
}

// runUnit processes one unit's messages in order. On a FIFO queue, a failure stops the rest
// of its group.
func (b *batch) runUnit(ctx context.Context, unit []int) {
	var stopped map[string]int // FIFO group → its first failed message
	for _, i := range unit {
		o := &b.out[i]
		if j, ok := stopped[o.GroupID]; ok {
			b.fail(o, ReasonGroupStopped, groupStopped(b.out[j]))
		} else {
			b.process(ctx, unit, i)
		}
		if b.fifo && o.Failed() {
			if stopped == nil {
				stopped = make(map[string]int)
			}
			if _, ok := stopped[o.GroupID]; !ok {
				stopped[o.GroupID] = i
			}
		}
		if b.claims == nil && o.Failed() { // else the outcome is final once the claims are settled
			b.h.logFailure(ctx, o)
		}
	}
}

func (b *batch) fail(o *Outcome, reason Reason, err error) {
	o.Status, o.Reason, o.Err = StatusFailed, reason, err
}
