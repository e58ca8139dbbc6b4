package quorum

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestValidity(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		ttl, elapsed time.Duration
		factor       float64
		drift, valid time.Duration
	}{
		{10 * time.Second, 0, 0.01, 102 * ms, 9898 * ms},
		{10 * time.Second, 50 * ms, 0.01, 102 * ms, 9848 * ms},
		{10 * time.Second, 50 * ms, 0, 2 * ms, 9948 * ms},
		{1 * time.Second, 998 * ms, 0, 2 * ms, 0},
		{1 * time.Second, 999 * ms, 0, 2 * ms, -1 * ms},
		{100 * ms, 10 * ms, 0.49, 51 * ms, 39 * ms},
		{3 * ms, 0, 0.1, 2*ms + 300*time.Microsecond, 700 * time.Microsecond},
		{7 * time.Nanosecond, 0, 0.1, 2*ms + 1, -2*ms + 6}, // rounded up, never down
	} {
		assert.Equal(t, tc.drift, Drift(tc.ttl, tc.factor), "drift(%v, %v)", tc.ttl, tc.factor)
		assert.Equal(t, tc.valid, validity(tc.ttl, tc.elapsed, tc.factor), "validity(%v, %v, %v)", tc.ttl, tc.elapsed, tc.factor)
	}
}

func TestValidUntilIsDecisionPlusValidity(t *testing.T) {
	start := time.Now()
	elapsed := 37 * time.Millisecond
	got := ValidUntil(start, 10*time.Second, 0.01)
	assert.Equal(t, start.Add(elapsed).Add(validity(10*time.Second, elapsed, 0.01)), got)
	// The reading is monotonic: a wall-clock step cannot move it.
	assert.Contains(t, got.String(), "m=+")
}

func FuzzValidity(f *testing.F) {
	f.Add(int64(10*time.Second), int64(5*time.Millisecond), 0.01)
	f.Add(int64(time.Millisecond), int64(0), 0.0)
	f.Add(int64(1<<62), int64(1<<61), 0.49)
	f.Fuzz(func(t *testing.T, ttl, elapsed int64, factor float64) {
		if ttl <= 0 || ttl > 1<<62 || elapsed < 0 || elapsed > 1<<62 || !(factor >= 0 && factor < 0.5) {
			t.Skip()
		}
		d := Drift(time.Duration(ttl), factor)
		// The allowance covers at least the asked fraction plus 2ms...
		if float64(d) < float64(ttl)*factor+float64(2*time.Millisecond) {
			t.Fatalf("drift(%d, %v) = %v, less than ttl×factor+2ms", ttl, factor, d)
		}
		// ...and never exceeds the TTL beyond the constant part.
		if d > time.Duration(ttl)/2+2*time.Millisecond+1 {
			t.Fatalf("drift(%d, %v) = %v, more than half the ttl", ttl, factor, d)
		}
		v := validity(time.Duration(ttl), time.Duration(elapsed), factor)
		if v > time.Duration(ttl)-time.Duration(elapsed) {
			t.Fatalf("validity %v exceeds ttl - elapsed", v)
		}
		// Validity falls one for one as the attempt takes longer.
		if v2 := validity(time.Duration(ttl), time.Duration(elapsed)+time.Millisecond, factor); v-v2 != time.Millisecond {
			t.Fatalf("validity not decreasing one for one: %v then %v", v, v2)
		}
	})
}
