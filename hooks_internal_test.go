package idem

import (
	"context"
	"errors"
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
	runHook := reflect.TypeOf(func(context.Context, Event) context.Context { return nil })
	typ := reflect.TypeOf(Hooks{})
	require.Positive(t, typ.NumField())
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			require.True(t, f.Type == eventHook || f.Type == batchHook || f.Type == runHook,
				"%s is a %s: decide whether timed() covers it", f.Name, f.Type)
			var h Hooks
			reflect.ValueOf(&h).Elem().Field(i).Set(reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value {
				if f.Type.NumOut() == 1 {
					return []reflect.Value{reflect.Zero(f.Type.Out(0))}
				}
				return nil
			}))
			assert.Equal(t, f.Type != batchHook, h.timed(), "timed() with only %s set", f.Name)
		})
	}
	var none Hooks
	assert.False(t, none.timed(), "no hook, nothing to time")
}

// TestJoinHooksCoversEveryHook: JoinHooks joins every field of Hooks, so a hook added
// later is not dropped by it.
func TestJoinHooksCoversEveryHook(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeOf(Hooks{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			fn := reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value {
				calls++
				if f.Type.NumOut() == 1 {
					return []reflect.Value{reflect.Zero(f.Type.Out(0))}
				}
				return nil
			})
			var a, b Hooks
			reflect.ValueOf(&a).Elem().Field(i).Set(fn)
			reflect.ValueOf(&b).Elem().Field(i).Set(fn)
			j := reflect.ValueOf(JoinHooks(a, b)).Field(i)
			require.False(t, j.IsNil(), "%s not joined", f.Name)
			args := []reflect.Value{reflect.ValueOf(context.Background()), reflect.Zero(f.Type.In(1))}
			j.Call(args)
			assert.Equal(t, 2, calls, "%s calls both", f.Name)
		})
	}
}

// TestErrorTypesCoverEverySentinel: ErrorType names every sentinel of errorKinds.
func TestErrorTypesCoverEverySentinel(t *testing.T) {
	t.Parallel()
	for _, row := range errorKinds {
		found := false
		for _, n := range errorTypes {
			found = found || errors.Is(n.err, row.err)
		}
		assert.True(t, found, "%v has no row in errorTypes", row.err)
	}
	assert.Len(t, errorTypes, len(errorKinds))
}
