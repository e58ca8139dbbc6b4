package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/integration/clientnet"
	"github.com/redlock-go/redlock/redlock"
)

// What a release says is what happened, on real servers (three Redis 7.0
// processes, go-redis' default options, but for A's MaxRetries: see
// missedExtension). A holds the lock (TTL 10 s); at
// +4 s it extends while node 2 loses its requests, so node 2's key expires
// at +10 s, its own time, and A's validity runs to about +14 s; node 0
// restarts without persistence; B takes the lock on nodes 0 and 2 within
// A's validity. A's release must not claim that no one else held the lock.

const verdictTTL = 10 * time.Second

// missedExtension runs the schedule up to B's grant: A (through a network
// of its own, which cuts node 2 off during the extension) acquires with
// acquire and extends with extend, then B, on direct clients, acquires
// with take, retried while node 0 comes back. It returns when B holds.
func missedExtension(t *testing.T, s *Servers, net *clientnet.ClientNet, acquire, extend func(ctx context.Context) error,
	until func() time.Time, take func(ctx context.Context) error) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, acquire(ctx))
	start := time.Now()
	time.Sleep(4 * time.Second)
	require.NoError(t, net.Blackhole(2))
	require.NoError(t, extend(ctx), "the extension on nodes 0 and 1")
	// A's clients do not resend (MaxRetries -1): the request stays lost
	// once go-redis gave up on it, at its read timeout (3 s by default).
	time.Sleep(3500 * time.Millisecond)
	require.NoError(t, net.Heal(2))
	time.Sleep(time.Until(start.Add(verdictTTL + 300*time.Millisecond))) // node 2's key expired
	require.NoError(t, s.Restart(ctx, 0))
	deadline := time.Now().Add(2 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = take(ctx); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err, "B on nodes 0 and 2")
	require.True(t, time.Now().Before(until()), "B holds within A's validity")
}

// verdictNodes starts three servers and returns A's network and Redlock,
// through that network, and B's, on direct clients.
func verdictNodes(t *testing.T) (*Servers, *clientnet.ClientNet, *redlock.Redlock, *redlock.Redlock) {
	t.Helper()
	s := startServers(t, requireLaunchers(t)[0], 3)
	net, err := clientnet.NewClientNet([]string{s.Addr(0), s.Addr(1), s.Addr(2)})
	require.NoError(t, err)
	t.Cleanup(net.Close)
	aClients := make([]redis.UniversalClient, 3)
	for i := range aClients {
		aClients[i] = redis.NewClient(&redis.Options{Addr: net.Addr(i), MaxRetries: -1})
	}
	opts := []redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}
	return s, net, redlockOver(t, aClients, opts...), redlockOver(t, s.Clients(nil), opts...)
}

func TestVerdictUnlockAfterMissedExtension(t *testing.T) {
	s, net, ra, rb := verdictNodes(t)
	a, err := ra.NewMutex("verdict:mutex", redlock.WithTTL(verdictTTL))
	require.NoError(t, err)
	b, err := rb.NewMutex("verdict:mutex", redlock.WithTTL(verdictTTL))
	require.NoError(t, err)
	missedExtension(t, s, net, a.Lock, a.Extend, a.Until, b.TryLock)
	require.NoError(t, b.Unlock(t.Context()))
	err = a.Unlock(t.Context())
	// Node 2 answers after its own expiry (not held), node 0 from a
	// restarted server (unknown): not confirmed, never nil.
	require.Error(t, err, "B held the lock on nodes 0 and 2 within A's validity")
	assert.ErrorContains(t, err, "release not confirmed")
}

func TestVerdictReaderBesideWriter(t *testing.T) {
	s, net, ra, rb := verdictNodes(t)
	a, err := ra.NewRWMutex("verdict:rw", redlock.WithTTL(verdictTTL))
	require.NoError(t, err)
	b, err := rb.NewRWMutex("verdict:rw", redlock.WithTTL(verdictTTL))
	require.NoError(t, err)
	missedExtension(t, s, net, a.RLock, a.Extend, a.Until, b.TryLock)
	err = a.RUnlock(t.Context())
	require.Error(t, err, "writer B holds nodes 0 and 2")
	assert.ErrorContains(t, err, "release not confirmed")
	assert.NoError(t, b.Unlock(t.Context()), "the writer still holds")
}
