package esm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// invoke makes one invocation of batch and judges it. It returns an error only when ctx
// (the drain's) ends; the handler's failures are the invocation's outcome. lowest is the
// index of the lowest failure of a partial batch response.
func (p *Poller) invoke(ctx context.Context, shardID string, batch []Record, retry int) (inv Invocation, lowest int, err error) {
	seqs := make([]string, len(batch))
	for i, r := range batch {
		seqs[i] = r.SequenceNumber
	}
	p.mu.Lock()
	p.requests++
	inv = Invocation{
		Shard:     shardID,
		RequestID: fmt.Sprintf("esm-%08d", p.requests),
		Records:   seqs,
		Retry:     retry,
	}
	p.mu.Unlock()
	fault := FaultNone
	if p.cfg.fault != nil {
		fault = p.cfg.fault(Batch{Shard: shardID, Records: append([]string(nil), seqs...), Retry: retry})
	}
	if fault == FaultFail {
		inv.Outcome, inv.Err = FunctionError, ErrInjected
		return inv, 0, nil
	}
	out, callErr := p.call(ctx, inv.RequestID, event(batch))
	if err := ctx.Err(); err != nil {
		return inv, 0, err
	}
	switch {
	case callErr != nil:
		inv.Outcome, inv.Err = FunctionError, callErr
	case fault == FaultLoseResponse:
		inv.Outcome, inv.Err = FunctionError, ErrResponseLost
	default:
		var reason string
		inv.Outcome, inv.Failures, lowest, reason = judge(p.cfg.report, out, batch)
		if reason != "" {
			inv.Err = errors.New("esm: invalid partial batch response: " + reason)
		}
	}
	return inv, lowest, nil
}

// call runs the handler as the Lambda runtime does: a context with the function timeout
// as its deadline and a lambdacontext, the event as JSON. A crash, a timeout and a panic
// become the invocation's function error, whatever the handler returned.
func (p *Poller) call(ctx context.Context, requestID string, payload []byte) (out []byte, err error) {
	deadline := time.Now().Add(p.cfg.timeout)
	ictx, cancelTimeout := context.WithDeadlineCause(ctx, deadline, ErrTimeout)
	defer cancelTimeout()
	ictx, cancel := context.WithCancelCause(ictx)
	defer cancel(nil)
	c := &crash{cancel: cancel}
	ictx = context.WithValue(ictx, crashKey{}, c)
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{
		AwsRequestID:       requestID,
		InvokedFunctionArn: p.cfg.functionARN,
	})
	out, err = p.safeInvoke(ictx, payload)
	switch {
	case c.crashed():
		return nil, ErrCrashed
	case !time.Now().Before(deadline) || errors.Is(context.Cause(ictx), ErrTimeout):
		return nil, ErrTimeout
	case err != nil:
		return nil, err
	}
	return out, nil
}

// safeInvoke turns a panic of the handler into [ErrPanic].
func (p *Poller) safeInvoke(ctx context.Context, payload []byte) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("%w: %v", ErrPanic, v)
		}
	}()
	return p.handler.Invoke(ctx, payload)
}

// event returns the event Lambda sends for batch: {"Records":[...]}, each record's JSON
// as the source gave it.
func event(batch []Record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"Records":[`)
	for i, r := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r.Event)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}
