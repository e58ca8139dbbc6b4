// Code generated from redlockrueidis/redlockrueidis.go by go generate ./internal/node/valkeywire; DO NOT EDIT.

// Package redlockvalkey builds a [redlock.Redlock] over valkey-go clients
// (github.com/valkey-io/valkey-go) instead of go-redis ones: the same Redlock,
// with the same locks, options and guarantees; only the client that
// carries its commands differs.
//
//	var clients []valkey.Client
//	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
//		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}})
//		if err != nil {
//			return err
//		}
//		defer c.Close()
//		clients = append(clients, c)
//	}
//	rl, err := redlockvalkey.New(clients)
//
// Each client is one node: a single server, a Sentinel-managed master
// (ClientOption.Sentinel) or a Redis Cluster, each an independent master;
// TLS and ACL users are the client's own options. The servers are those
// redlock.New supports (Redis 7.0 or later, Valkey 8.0 or later).
//
// What differs from go-redis: a node whose server refuses connections
// fails each call with the client's own dial error, bounded by the node
// timeout, where redlock.New's go-redis nodes end such calls at the
// refusal; valkey-go retries no write on a broken connection, where go-redis
// does (the library reads a resent or a lost write either way).
package redlockvalkey

import (
	"fmt"

	valkey "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock/internal/adapt"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/valkeywire"
	"github.com/redlock-go/redlock/redlock"
)

// New returns a Redlock over the given clients, one per independent Redis
// master, as [redlock.New] does over go-redis clients: each client must
// address a different server. It returns an error wrapping
// [redlock.ErrInvalidArgument] for no clients, a nil client, a client
// given twice or two clients that address the same server, or an invalid
// option. No I/O but what the clients did when they were made.
func New(clients []valkey.Client, opts ...redlock.Option) (*redlock.Redlock, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: no clients", redlock.ErrInvalidArgument)
	}
	ts := make([]node.Transport, len(clients))
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: client %d is nil", redlock.ErrInvalidArgument, i)
		}
		for j := range i {
			if clients[j] == c {
				return nil, fmt.Errorf("%w: clients %d and %d are the same client", redlock.ErrInvalidArgument, j, i)
			}
		}
		t := valkeywire.New(c)
		if j, dup := seen[t.Addr()]; dup {
			return nil, fmt.Errorf("%w: clients %d and %d both address %s", redlock.ErrInvalidArgument, j, i, t.Addr())
		}
		seen[t.Addr()] = i
		ts[i] = t
	}
	os := make([]any, len(opts))
	for i, o := range opts {
		os[i] = o
	}
	r, err := adapt.Build(ts, os)
	if err != nil {
		return nil, err
	}
	return r.(*redlock.Redlock), nil
}
