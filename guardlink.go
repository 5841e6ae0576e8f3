package idem

import (
	"context"

	"github.com/idemkit/idem/internal/guardlink"
)

func init() {
	guardlink.DoInBatch = doInBatch
}

// doInBatch is [DoMet] as a batch's call, for the batch engine: see
// [guardlink.DoInBatch]. The handler's [OnRefused] choice is ignored.
func doInBatch(ctx context.Context, g, req, met any, fn func(context.Context) error) (bool, error) {
	m, _ := met.(*KeyMet) // a nil met shares nothing, as DoMet's
	_, replayed, err := doLeaving(ctx, g.(*Guard), req.(Request), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	}, nil, m, true)
	return replayed, err
}
