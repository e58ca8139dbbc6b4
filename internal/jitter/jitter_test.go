package jitter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each wait lies within its bounds, which double from Lo up to Hi.
func TestBackoffBounds(t *testing.T) {
	lo, hi := 10*time.Millisecond, 200*time.Millisecond
	for attempt := 1; attempt < 100; attempt++ {
		ceiling := lo
		for range attempt - 1 {
			ceiling = min(hi, 2*ceiling)
		}
		for range 50 {
			d := Backoff{Lo: lo, Hi: hi}.Delay(attempt)
			require.GreaterOrEqual(t, d, lo)
			require.LessOrEqual(t, d, ceiling, "attempt %d", attempt)
		}
	}
	assert.Equal(t, lo, Backoff{Lo: lo, Hi: hi}.Delay(1), "the first retry waits the minimum")
	assert.Equal(t, time.Millisecond, Backoff{Lo: time.Millisecond, Hi: time.Millisecond}.Delay(7))
}

// Sleep returns true once d passed, false at once when done closes first.
func TestSleep(t *testing.T) {
	done := make(chan struct{})
	assert.True(t, Sleep(time.Millisecond, done))
	close(done)
	start := time.Now()
	assert.False(t, Sleep(time.Hour, done))
	assert.Less(t, time.Since(start), time.Minute)
}
