// Package quorum asks the N nodes and counts their votes: the pool of
// nodes as this process sees them (health, probes, releases owed, every
// call in flight), the round that sends one request to every node and
// collects the votes under one node timeout, the tally that decides when a
// quorum is won or can no longer be, the acquire rule of one attempt (the
// split vote, re-asks, which nodes may hold its token), the gates that
// order one node's requests, the clock guard that keeps a node whose clock
// jumped from voting, and time and validity.
//
// It knows nodes (internal/node) and nothing above them: no lock kind, no
// lease, no waiting, no option, Observer or public error. It tells its
// caller of a failed node call through the ReportFunc it is handed, and of
// a clock jump through the guard's Tell function.
package quorum
