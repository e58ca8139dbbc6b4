package node

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
