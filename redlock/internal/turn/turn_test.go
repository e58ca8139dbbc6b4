package turn

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/stretchr/testify/assert"
)

// The bounds the facade's tests wait out (redlock/handoff_test.go,
// notify_test.go): a change here must change them too.
func TestBounds(t *testing.T) {
	assert.Equal(t, 5*time.Millisecond, handoffWindow)
}

// After a failed attempt that some nodes granted, a Lock tries again
// within two attempt times, twice in a row at most; a reader or a permit
// does so, as many times, only after an announced release woke an attempt
// (the release had not reached every node yet), and otherwise waits its
// back-off.
func TestDelayAfterPartialGrant(t *testing.T) {
	settings := engine.Settings{DelayMin: 5 * time.Second, DelayMax: 10 * time.Second}
	partial := engine.Refusal{Granted: 1, Took: time.Millisecond}
	short := 2*partial.Took + 1
	for _, c := range []struct {
		kind  Kind
		woke  bool
		short bool
	}{
		{Lock, false, true},
		{Lock, true, true},
		{Reader, false, false},
		{Reader, true, true},
		{Permit, false, false},
		{Permit, true, true},
	} {
		wt := &Waiting{Holder: &lease.Holder{Settings: settings}, Kind: c.kind}
		d := wt.delay(1, partial, c.woke)
		if !c.short {
			assert.GreaterOrEqual(t, d, settings.DelayMin, "kind %d, woke %v: the back-off", c.kind, c.woke)
			continue
		}
		assert.Less(t, d, short, "kind %d, woke %v: soon", c.kind, c.woke)
		// The soon retry's attempt was woken by its timer, not by a
		// release: it still retries soon (the release is still on its
		// way to the nodes that refused).
		assert.Less(t, wt.delay(1, partial, false), short, "kind %d, woke %v: the second in a row is soon", c.kind, c.woke)
		assert.GreaterOrEqual(t, wt.delay(1, partial, false), settings.DelayMin, "kind %d: the third in a row waits the back-off", c.kind)
	}
	wt := &Waiting{Holder: &lease.Holder{Settings: settings}, Kind: Reader}
	assert.GreaterOrEqual(t, wt.delay(1, engine.Refusal{Took: time.Millisecond}, true), settings.DelayMin, "no node granted: the back-off")
}
