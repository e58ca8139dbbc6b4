package node

// SetWay makes the node speak w from its first request on (see setWay):
// the tests of package node_test choose how a node is spoken to.
func (n *Redis) SetWay(w Way) { n.setWay(w) }

// SemGrantOf returns what rep, a SemAcquire's reply, says beyond OK.
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
