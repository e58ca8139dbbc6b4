package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// The functions due on one line run at its instant, one after the other
// on one goroutine, in the order they were given; a line stopped by Close
// runs none.
func TestDueLinesRunTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newFakeEngine(t, 3)
		at := time.Now().Add(time.Second)
		var running, most, ran atomic.Int32
		var order []int
		const n = 50
		for k := range n {
			e.Due(at, time.Second, func(*engine.Batch) {
				most.Store(max(most.Load(), running.Add(1)))
				order = append(order, k) // one goroutine: no race
				time.Sleep(time.Millisecond)
				running.Add(-1)
				ran.Add(1)
			})
		}
		time.Sleep(time.Second + n*time.Millisecond)
		synctest.Wait()
		require.Equal(t, int32(n), ran.Load())
		assert.Equal(t, int32(1), most.Load(), "the line's functions ran one at a time")
		for k := range n {
			assert.Equal(t, k, order[k])
		}
		var late atomic.Bool
		e.Due(time.Now().Add(time.Second), time.Second, func(*engine.Batch) { late.Store(true) })
		require.NoError(t, e.Close(context.Background()))
		e.Due(time.Now().Add(time.Second), time.Second, func(*engine.Batch) { late.Store(true) })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.False(t, late.Load(), "nothing runs after Close")
	})
}
