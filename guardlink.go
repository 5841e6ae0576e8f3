package idem

import (
	"context"
	"fmt"

	"github.com/idemkit/idem/internal/guardlink"
)

func init() {
	guardlink.DoInBatch = doInBatch
}

// doInBatch is [DoMet] as a batch's call, for the batch engine: see
// [guardlink.DoInBatch]. The handler's [OnRefused] choice is ignored.
func doInBatch(ctx context.Context, g, req, met any, fn func(context.Context) error) (bool, error) {
	m, ok := met.(*KeyMet) // a nil *KeyMet shares nothing, as DoMet's
	if !ok && met != nil {
		// Taken as nil, it would let the call fail open over a record an earlier call met.
		panic(fmt.Sprintf("idem: guardlink.DoInBatch: met is %T, not *idem.KeyMet", met))
	}
	_, replayed, err := doLeaving(ctx, g.(*Guard), req.(Request), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	}, nil, m, true)
	return replayed, err
}
