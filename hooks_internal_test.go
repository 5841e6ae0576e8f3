package idem

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every hook takes an Event, which the guard times when the hook is set, or is OnBatch,
// whose event the wrapper times itself: a hook added later must choose, here, which.
func TestTimedCoversEveryEventHook(t *testing.T) {
	t.Parallel()
	eventHook := reflect.TypeOf(func(context.Context, Event) {})
	batchHook := reflect.TypeOf(func(context.Context, BatchEvent) {})
	typ := reflect.TypeOf(Hooks{})
	require.Positive(t, typ.NumField())
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			require.True(t, f.Type == eventHook || f.Type == batchHook,
				"%s is a %s: decide whether timed() covers it", f.Name, f.Type)
			var h Hooks
			reflect.ValueOf(&h).Elem().Field(i).Set(reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value { return nil }))
			assert.Equal(t, f.Type == eventHook, h.timed(), "timed() with only %s set", f.Name)
		})
	}
	var none Hooks
	assert.False(t, none.timed(), "no hook, nothing to time")
}
