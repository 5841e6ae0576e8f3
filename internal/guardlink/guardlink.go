// Package guardlink is the batch engine's way into package idem for a call that the public
// API does not offer: [DoInBatch], a guarded call that is a batch's. Package idem sets it
// when it is loaded; only package batch calls it.
//
// The parameters are untyped because package idem imports this one, so this one cannot
// name idem's types; DoInBatch panics on arguments of other types.
package guardlink

import "context"

// DoInBatch is idem.DoMet(ctx, g, req, met, fn) as a batch's call: g an *idem.Guard, req an
// idem.Request, met an *idem.KeyMet (may be nil). It differs from idem.DoMet in one thing:
// the handler's idem.OnRefused choice is ignored, as in every batch (idem.Guard.Claim,
// idem.DoClaimed), and a key whose attached writes the store refused for good is released.
// It reports whether the result was replayed, and returns DoMet's error.
var DoInBatch func(ctx context.Context, g, req, met any, fn func(context.Context) error) (replayed bool, err error)
