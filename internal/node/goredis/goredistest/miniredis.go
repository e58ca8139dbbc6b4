// Package goredistest holds what tests of the go-redis transport share:
// in-process servers with a client each, and clients that refuse scripts
// as a node without them does.
package goredistest

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Miniredis starts n in-process servers (miniredis: the commands and Lua
// scripts of a real Redis) and returns them with a client of each, all
// closed when the test ends.
func Miniredis(tb testing.TB, n int) ([]*miniredis.Miniredis, []redis.UniversalClient) {
	tb.Helper()
	servers := make([]*miniredis.Miniredis, n)
	clients := make([]redis.UniversalClient, n)
	for i := range n {
		servers[i] = miniredis.RunT(tb)
		c := redis.NewClient(&redis.Options{Addr: servers[i].Addr()})
		tb.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return servers, clients
}
