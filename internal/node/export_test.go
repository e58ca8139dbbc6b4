package node

import (
	"context"

	"github.com/redlock-go/redlock/internal/scripts"
)

// SemGrantOf returns what rep, a permit's Acquire's reply, says beyond OK.
func SemGrantOf(rep Reply) SemGrant {
	g, _ := rep.Value.(SemGrant)
	return g
}

// SetCaps makes the node's capabilities c without asking it: the tests
// of package node_test play a server that miniredis' INFO does not name.
func (n *Redis) SetCaps(c Caps) {
	n.probe.Do(func() {})
	n.caps.Store(&c)
}

// LaneIndex is the lane op travels, spread picking one for an operation
// of no name.
func LaneIndex(op Op, spread uint32) int { return laneOf(op, spread) }

// Reload is reload.
func Reload(ctx context.Context, c Conn, cmds []Cmd) bool { return reload(ctx, c, cmds) }

// EvalArgs is evalArgs.
func EvalArgs(s *scripts.Script, keys []string, args ...any) []any { return evalArgs(s, keys, args...) }
