package pgoutbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/pgstore"
)

// Run relays until ctx ends, then returns ctx's error. It listens on the table's channel
// (pgstore.OutboxChannel) on a connection of its own and runs a pass ([Relay.RelayOnce])
// at once on a notification, at once again after a full pass ([Pass.Full]), after
// [WithPollInterval] without either (the fallback for a notification missed while the
// listening connection was down), and after [WithRetryDelay] when a pass failed or had
// messages the publisher refused. Errors of passes and of the listening connection go to
// [Hooks.OnError] and are retried.
//
// The listening connection is one of the pool's, held while Run runs, and each pass takes
// another: Run returns an error wrapping idem.ErrInvalidOption at once for a pool whose
// MaxConns is below 2, whose passes would wait for a connection forever. (RelayOnce alone
// needs one.)
func (r *Relay) Run(ctx context.Context) error {
	if n := r.pool.Config().MaxConns; n < 2 {
		return invalid("Run", fmt.Sprintf("the pool's MaxConns is %d: Run holds one connection to listen and needs another for its passes", n))
	}
	wake := make(chan struct{}, 1)
	listening := make(chan struct{})
	done := make(chan struct{})
	lctx, stop := context.WithCancel(ctx)
	go func() {
		defer close(done)
		r.listen(lctx, wake, listening)
	}()
	defer func() { stop(); <-done }()
	select { // a pass before LISTEN could miss an event committed in between
	case <-listening:
	case <-ctx.Done():
		return ctx.Err()
	}
	var lastLag time.Time
	for {
		p, err := r.RelayOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.onError(err)
		}
		if h := r.cfg.hooks.OnLag; h != nil && time.Since(lastLag) >= r.cfg.poll {
			lastLag = time.Now()
			if lag, err := r.Lag(ctx); err == nil {
				h(lag)
			} else if ctx.Err() == nil {
				r.onError(err)
			}
		}
		wait := r.cfg.poll
		switch {
		case err != nil:
			wait = r.cfg.retry
		case p.Full: // a refused key takes no more of the next pass than its oldest
			continue
		case p.Failed > 0:
			wait = r.cfg.retry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
			if err != nil || p.Failed > 0 {
				<-t.C // a failure waits its delay, wake-ups or not
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// listen holds a connection that LISTENs on the table's channel and signals wake on each
// notification; it closes listening once the first LISTEN succeeded or failed, and
// reconnects after [WithRetryDelay] when the connection fails.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}, listening chan<- struct{}) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	first := true
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, signal, func() {
			if first {
				first = false
				close(listening)
			}
		})
		if first { // could not listen: run on polling meanwhile
			first = false
			close(listening)
		}
		if ctx.Err() != nil {
			return
		}
		r.onError(err)
		signal() // events may have committed while the connection was down
		t := time.NewTimer(r.cfg.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, signal, ready func()) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection ends here: its LISTEN must not outlive it in the pool.
	defer conn.Release()
	defer func() { _ = conn.Conn().Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{pgstore.OutboxChannel(r.table)}.Sanitize()); err != nil {
		return err
	}
	ready()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		signal()
	}
}

func (r *Relay) onError(err error) {
	if h := r.cfg.hooks.OnError; h != nil && !errors.Is(err, context.Canceled) {
		h(err)
	}
}
