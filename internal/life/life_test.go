package life

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGroupRefusesOnceClosing(t *testing.T) {
	var g Group
	require.True(t, g.Enter())
	ran := g.While(func() {})
	assert.True(t, ran, "open: While runs")
	select {
	case <-g.Closing():
		t.Fatal("Closing closed while open")
	default:
	}
	assert.True(t, g.Stop(), "the first Stop closes")
	assert.False(t, g.Stop(), "a second Stop does nothing")
	assert.True(t, g.Closed())
	assert.False(t, g.Enter(), "closing: Enter refuses")
	assert.False(t, g.While(func() { t.Error("While ran while closing") }))
	select {
	case <-g.Closing():
	default:
		t.Fatal("Closing not closed after Stop")
	}
	g.Done() // the goroutine Enter counted
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	require.NoError(t, g.Wait(ctx), "nothing counted once closing")
}

// Wait returns when the group is done, or at ctx's end with its error,
// and at once for a ctx already ended; work already admitted still runs
// while closing.
func TestGroupWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		g.Go(func() { time.Sleep(time.Second) })
		start := time.Now()
		require.NoError(t, g.Wait(t.Context()))
		assert.Equal(t, time.Second, time.Since(start), "waited for the group")

		release := make(chan struct{})
		g.Go(func() { <-release })
		g.Stop()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start = time.Now()
		require.ErrorIs(t, g.Wait(ctx), context.DeadlineExceeded)
		assert.Equal(t, time.Minute, time.Since(start), "stopped waiting at ctx's end")
		start = time.Now()
		require.ErrorIs(t, g.Wait(ctx), context.DeadlineExceeded)
		assert.Zero(t, time.Since(start), "no wait once ctx ended")
		g.Go(func() {}) // admitted work runs while closing
		close(release)
		require.NoError(t, g.Wait(t.Context()))
	})
}
