package node

// SetWay makes the node speak w from its first request on (see setWay):
// the tests of package node_test choose how a node is spoken to.
func (n *Redis) SetWay(w Way) { n.setWay(w) }

// SemGrantOf returns what rep, a SemAcquire's reply, says beyond OK.
func SemGrantOf(rep Reply) SemGrant {
	g, _ := rep.Value.(SemGrant)
	return g
}
