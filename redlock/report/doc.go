// Package report holds what a redlock.Redlock reports: to an operator
// (each node's health and audit, what the nodes hold for a lock, the
// outcome of a forced release) and to an [Observer] (the calls it sees,
// the acquisitions that end, the nodes that fail). The core of package
// redlock reads without it; reach for it to watch or run a deployment.
//
// Apart from the Observer, everything here is data: the values that
// Redlock.Health, Redlock.Audit, Redlock.Inspect and Redlock.ForceUnlock
// return, the arguments of the Observer's methods, and [NodeError], the
// failure of one node that the errors of every operation wrap.
package report
