package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// batch is the work of one Process call. Each item index belongs to exactly one unit, and
// only the goroutine running that unit touches the item's entries in out and state.
type batch struct {
	e     *Engine
	items []Item
	run1  func(context.Context, int) error
	mode  Mode
	out   []Outcome
	state []itemState

	deadline    time.Time
	hasDeadline bool
	margin      time.Duration

	// claims holds the keys claimed together (see claimAll); nil on the per-item path.
	// claimUsed marks the claims an item has run under; claim c belongs to the unit of the
	// items with its key, so only that unit's goroutine touches claimUsed[c].
	claims    *idem.Batch
	claimUsed []bool
}

// itemState is what the batch knows of one item besides its outcome.
type itemState struct {
	// tried marks an outcome that came from the guard (or from an item whose outcome did):
	// the outcomes that later items with the same key and fingerprint may share.
	tried bool
	// dupOf is the earlier item whose outcome this one took, or -1.
	dupOf int
	// claim is the index of the item's key in the batch's claims, or -1.
	claim int
	// recordNow records the item's outcome before it returns, not with the batch: another
	// item of its group follows it ([Mode.RecordBeforeNext]).
	recordNow bool
	// met is the record the guard's calls for the item's key met holding it, shared by the
	// items of the key: the batch claim's, or one a claim or poll of any of them met. No
	// later call for the key (a poll of [WithWaitInFlight], another item of the key) fails
	// open over it ([idem.WithFailOpen]). nil for an item without a key.
	met *idem.KeyMet
}

func (e *Engine) newBatch(ctx context.Context, items []Item, run func(context.Context, int) error, mode Mode, start time.Time) *batch {
	b := &batch{
		e:      e,
		items:  items,
		run1:   run,
		mode:   mode,
		out:    make([]Outcome, len(items)),
		state:  make([]itemState, len(items)),
		margin: e.cfg.margin,
	}
	b.deadline, b.hasDeadline = ctx.Deadline()
	if b.hasDeadline && !e.cfg.marginSet {
		// A fixed margin would starve a function whose whole timeout is shorter than it.
		b.margin = max(min(b.margin, b.deadline.Sub(start)/4), 0)
	}
	var last map[string]int // group → its last item
	if mode.Ordered && mode.RecordBeforeNext {
		last = make(map[string]int, len(items))
		for i, it := range items {
			last[it.Group] = i
		}
	}
	var now map[string]bool // key → an item of it is followed in its group
	mets := make(map[string]*idem.KeyMet, len(items))
	for i, it := range items {
		b.state[i] = itemState{dupOf: -1, claim: -1}
		if it.Err == nil {
			if mets[it.Key] == nil {
				mets[it.Key] = new(idem.KeyMet)
			}
			b.state[i].met = mets[it.Key]
		}
		if last != nil && last[it.Group] != i && it.Err == nil {
			if now == nil {
				now = make(map[string]bool)
			}
			now[it.Key] = true
		}
		b.out[i] = Outcome{ID: it.ID, Group: it.Group}
		if it.Err == nil {
			b.out[i].Key = it.Key
		}
	}
	if len(now) > 0 {
		// Items of one key share one run, whichever of them runs it: if any must be
		// recorded before its group goes on, so must that run.
		for i, it := range items {
			b.state[i].recordNow = it.Err == nil && now[it.Key]
		}
	}
	return b
}

// plan splits the batch into units, each processed in the items' order by one goroutine,
// different units concurrently. Items that share a key are one unit, so they are never
// raced against each other and later ones can take an earlier one's outcome; in an ordered
// batch, so are the items of a group, to keep its order. A unit is thus a connected set of
// items linked by key or group; units are ordered by their first item.
func (b *batch) plan() [][]int {
	n := len(b.items)
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
	union := func(i, j int) { // the root is always a unit's first item
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
	if b.mode.Ordered {
		byGroup = make(map[string]int)
	}
	for i, it := range b.items {
		if it.Err == nil {
			link(byKey, it.Key, i)
		}
		if b.mode.Ordered {
			link(byGroup, it.Group, i)
		}
	}
	// Number the units in the order of their first item (a unit's root, its smallest
	// index, comes before its other items), then lay them out in one slice.
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
// all have finished. Every item checks ctx before it starts, so the workers stop starting
// work once ctx ends and finish with the items they have started.
func (b *batch) run(ctx context.Context, units [][]int) {
	workers := min(b.e.cfg.concurrency, len(units))
	if workers <= 1 {
		// One at a time: the whole batch as one unit, so the items run in their order
		// across units too (a stream's shard order), not unit after unit.
		all := make([]int, len(b.items))
		for i := range all {
			all[i] = i
		}
		b.runUnit(ctx, all)
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

// runUnit processes one unit's items in order. In an ordered batch, a failure stops the
// rest of its group.
func (b *batch) runUnit(ctx context.Context, unit []int) {
	var stopped map[string]int // group → its first failed item
	for _, i := range unit {
		o := &b.out[i]
		if j, ok := stopped[o.Group]; ok {
			b.fail(o, ReasonGroupStopped, groupStopped(b.out[j]))
		} else {
			b.process(ctx, unit, i)
		}
		if b.mode.Ordered && o.Failed() {
			if stopped == nil {
				stopped = make(map[string]int)
			}
			if _, ok := stopped[o.Group]; !ok {
				stopped[o.Group] = i
			}
		}
		if b.claims == nil && o.Failed() { // else the outcome is final once the claims are settled
			b.e.logFailure(ctx, o)
		}
	}
}

func (b *batch) fail(o *Outcome, reason Reason, err error) {
	o.Status, o.Reason, o.Err = StatusFailed, reason, err
}
