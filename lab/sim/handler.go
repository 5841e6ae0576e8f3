package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
)

// Errors of the simulated handlers.
var (
	errHandler     = errors.New("sim: handler failed")
	errPermanent   = errors.New("sim: handler failed permanently")
	errAttach      = errors.New("sim: attached write's condition failed")
	errUnavailable = errors.New("sim: handler answers 500")
)

// panicValue is what a simulated handler panics with.
type panicValue struct{ run int }

type ending uint8

const (
	endOK        ending = iota
	endError            // an error: the key is released
	endPermanent        // an error WithRememberFailures stores
	endPanic
	end500 // an HTTP 500: not cacheable, released
)

var endingNames = [...]string{"ok", "error", "permanent error", "panic", "500"}

// plan is what one run of a handler does, drawn by the scheduler when it starts.
type plan struct {
	steps      []string // "work" (a step where time may pass) or "checkpoint"
	end        ending
	attach     bool // attach a write to the completion
	attachFail bool // whose condition fails
}

func (p *plan) String() string {
	s := strings.Join(p.steps, ",") + " then " + endingNames[p.end]
	if p.attach {
		s += " with an attached write"
		if p.attachFail {
			s += " that fails"
		}
	}
	return s
}

func (w *world) drawPlan(a *actor) *plan {
	p := &plan{}
	for range 1 + w.rng.IntN(3) {
		step := "work"
		if w.p.has(FeatCheckpoint) && w.rng.IntN(2) == 0 {
			step = "checkpoint"
		}
		p.steps = append(p.steps, step)
	}
	if !w.final {
		r := w.rng.IntN(100)
		switch {
		case r < 10 && w.p.has(FeatError):
			p.end = endError
		case r < 15 && w.p.has(FeatRemember):
			p.end = endPermanent
		case r < 22 && w.p.has(FeatPanic):
			p.end = endPanic
		case r < 27 && a.kind == "http" && w.p.has(FeatError):
			p.end = end500
		}
	}
	if w.p.has(FeatAttach) && w.rng.IntN(3) == 0 {
		p.attach = true
		p.attachFail = !w.final && w.rng.IntN(6) == 0
	}
	return p
}

// handle is every simulated handler: it waits for its start (where its plan is drawn),
// checks the checkpoint it inherits, walks its steps, honouring its context, and ends as
// planned; a successful run records its effect in the ledger and returns "<key>#r<run>".
func (w *world) handle(ctx context.Context, key string) (string, error) {
	a := actorOf(ctx)
	name := w.keyNames[key]
	// How the guard called the handler, judged before the start step lets time pass.
	guarded := !errors.Is(idem.Attach(ctx), idem.ErrNoLease)
	ctxErr := ctx.Err()
	// A Lambda invocation (sqs, fifo, stream) is one batch.Engine Process: every call of a
	// key in it (a poll of WithWaitInFlight, an item with another body) shares the record
	// met, so none fails open once one met it; an http invocation is one Do.
	met := !guarded && (a.kind == "do" || a.kind == "batch" || a.kind == "stream" || a.kind == "sqs" || a.kind == "fifo" || a.kind == "http") && w.led.hasMet(a, key)
	label := name + reqTag(ctx) // the points' key, unique within a batch
	d := w.block(a, pointStep, "start", label)
	if d.abort {
		return "", errShutdown
	}
	r := w.led.handlerStart(w, a, key, ctx, guarded, ctxErr, met)
	if a.inv != nil {
		w.streamStart(a, r)
	}
	p := d.plan
	ok, attached, how := false, false, "gave up"
	defer func() { w.led.handlerEnd(w, r, ok, attached, how) }()
	for i, step := range p.steps {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("sim: handler gives up: %w", context.Cause(ctx))
		}
		if step == "checkpoint" {
			if err := idem.Checkpoint(ctx, fmt.Sprintf("%s#r%d/%d", name, r.id, i)); err != nil && r.guarded {
				return "", fmt.Errorf("sim: handler gives up: %w", err)
			}
			continue
		}
		d := w.block(a, pointStep, "work", label)
		if d.abort {
			return "", errShutdown
		}
		if d.pause > 0 {
			// A slow call, or a pause of this goroutine alone: it honours nothing until it
			// resumes (the lease watchdog runs on).
			<-a.c.clk.After(d.pause)
		}
	}
	how = endingNames[p.end]
	if p.end != endOK {
		how += " after " + strings.Join(p.steps, ",")
	}
	switch p.end {
	case endError:
		return "", errHandler
	case endPermanent:
		return "", errPermanent
	case endPanic:
		panic(panicValue{run: r.id})
	case end500:
		return "", errUnavailable
	}
	if w.block(a, pointStep, "effect", label).abort {
		return "", errShutdown
	}
	if err := ctx.Err(); err != nil {
		how = "gave up before its effect"
		return "", fmt.Errorf("sim: handler gives up before its effect: %w", context.Cause(ctx))
	}
	w.led.effect(w, r)
	if a.inv != nil {
		w.streamEffect(r)
	}
	if p.attach && r.guarded {
		token, fail := r.token, p.attachFail
		if fail && w.cfg.AttachPanics {
			// The write panics in the completion's transaction (a handler's bug), which
			// rolls back: see store.panicIfPoisoned.
			w.panicTokens.Store(token, r.id)
		}
		err := idem.Attach(ctx, func() error {
			if fail {
				return errAttach
			}
			w.led.attachedWrite(w, key, token)
			return nil
		})
		attached = err == nil && !fail
		if fail {
			how = "ok, but its attached write fails"
		}
	}
	// A write that panics before its completion is sent: the ledger counts the run as
	// failed, nothing of it ever reaching the store.
	ok = !(p.attach && r.guarded && p.attachFail && w.cfg.AttachPanics)
	if !ok {
		how = "ok, but its attached write panics"
	}
	return fmt.Sprintf("%s#r%d", name, r.id), nil
}
