package redlock_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlock"
)

// newTestRedlock is the README's "Testing code that uses it" helper, kept
// here so that it compiles and works.
func newTestRedlock(t *testing.T, n int) (*redlock.Redlock, []*miniredis.Miniredis) {
	t.Helper()
	var clients []redis.UniversalClient
	var servers []*miniredis.Miniredis
	for range n {
		s := miniredis.RunT(t) // stopped when the test ends
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients, servers = append(clients, c), append(servers, s)
	}
	rl, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Close(context.Background()) })
	return rl, servers
}

func TestTheReadmeTestingHelper(t *testing.T) {
	rl, servers := newTestRedlock(t, 3)
	servers[2].Close() // a node down: two of three still grant
	ran := false
	err := rl.Do(t.Context(), "transfer:7", func(context.Context) error {
		ran = true
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do on two of three miniredis nodes: ran %v, %v", ran, err)
	}
	servers[1].Close() // no majority left
	mu, err := rl.NewMutex("transfer:7")
	if err != nil {
		t.Fatal(err)
	}
	if err := mu.TryLock(t.Context()); err == nil {
		t.Fatal("acquired with one node of three")
	}
}
