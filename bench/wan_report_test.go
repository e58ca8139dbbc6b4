package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The longest wait's account: the holds of others that began inside it,
// and the time the lock lay between holders while it lasted.
func TestLongestWaits(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	name := implementations[0].name
	r := &wanResults{runs: map[string][]*contendedRun{name: {{holds: []wanHoldRec{
		{contender: 0, site: 0, called: at(0), locked: at(0), unlocking: at(10)},    // held when the wait began
		{contender: 1, site: 1, called: at(5), locked: at(20), unlocking: at(30)},   // a turn passed: 10 ms between
		{contender: 2, site: 2, called: at(2), locked: at(100), unlocking: at(110)}, // the wait: 70 ms between
	}}}}}
	var b strings.Builder
	r.longestWaits(&b)
	assert.Contains(t, b.String(), "- "+name+": C 98; 1; 80 / B 15; 0; 10 / A 0; 0; 0\n")
}
