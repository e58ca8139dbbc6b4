// Package adapt lets the packages of clients other than go-redis
// (redlockrueidis) build a Redlock over their transports, as redlock.New
// builds one over go-redis clients, without a public constructor that
// names the node layer.
package adapt

import "github.com/redlock-go/redlock/internal/node"

// Build is set by package redlock, before anything can call it: it returns
// a *redlock.Redlock over one node per transport, made with opts (each a
// redlock.Option), or New's error. It checks the options as New does; the
// transports are the caller's to check (none nil, none twice).
var Build func(ts []node.Transport, opts []any) (any, error)
