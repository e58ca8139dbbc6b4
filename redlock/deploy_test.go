package redlock

import (
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"

	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What real deployments answer that the lock must not mistake: refusals no
// retry can change, releases a client resent, failures hidden behind a
// timeout.

// replyError is an error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

const errNoPerm = replyError("NOPERM this user has no permissions to access one of the keys used as arguments")

// A majority of nodes refusing for good stops Lock at once, whatever its
// context; a minority is tolerated like any failed minority.
func TestLockStopsOnMisconfiguredMajority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errNoPerm })
		}
		m := newFakeMutex(t, r, "k")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		err := m.Lock(ctx)
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, ErrMisconfigured)
		assert.ErrorContains(t, err, "NOPERM")
		assert.ErrorContains(t, err, "misconfigured nodes: 3")
		assert.NoError(t, ctx.Err(), "Lock returned before its context ended")
		assert.Less(t, time.Since(start), time.Second)
		assert.Equal(t, 1, fs[0].Count("acquire"), "one attempt")
		hopeless, err := m.lockHopeless(ctx)
		require.ErrorIs(t, err, ErrMisconfigured)
		assert.True(t, hopeless, "the tally says no quorum is left")

		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil }) // two left: a minority
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
	})
}

// Locker().Lock cannot return an error: it reports a hopeless failure to
// onError and tries again, or panics without onError.
func TestLockerOnMisconfigured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithRetryDelay(10*time.Millisecond, 50*time.Millisecond))
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Err = errNoPerm })
		}
		m := newFakeMutex(t, r, "k")
		var got atomic.Int32
		l := m.Locker(func(err error) {
			assert.ErrorIs(t, err, ErrMisconfigured)
			if got.Add(1) == 2 {
				for _, f := range fs { // fixed by an operator
					f.Faults(func(n *nodetest.Fake) { n.Err = nil })
				}
			}
		})
		l.Lock()
		assert.Equal(t, int32(2), got.Load(), "each hopeless attempt reported, then acquired once fixed")
		l.Unlock()

		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Err = errNoPerm })
		}
		func() {
			defer func() {
				rec := recover()
				require.NotNil(t, rec, "without onError, nothing could say why Lock blocks")
				err, ok := rec.(error)
				require.True(t, ok)
				assert.ErrorIs(t, err, ErrMisconfigured)
			}()
			m.Locker(nil).Lock()
		}()
	})
}

// go-redis resends a command whose reply timed out: a release applied the
// first time finds the key gone the second. Within the validity that is
// this release's own doing, and Unlock says the lock was held.
// A node whose yes to an extension comes after the round's quorum holds
// the token as long as the voters do (simulator seed 114000): when its
// release's reply is lost and the resend finds the key gone, past the
// grant's validity but within the extension's, that is this release's own
// doing, and Unlock says nil. Before, the late yes was not recorded, the
// node counted only to the grant's expiry, and Unlock said ErrNotHeld.
func TestLateExtensionCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second))
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(600 * time.Millisecond)
		fs[2].Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"extend": 5 * time.Millisecond} })
		require.NoError(t, m.Extend(t.Context()), "at a quorum, without node 2")
		synctest.Wait()
		time.Sleep(10 * time.Millisecond) // node 2's yes comes in
		synctest.Wait()
		time.Sleep(500 * time.Millisecond) // past the grant's validity
		fs[2].Faults(func(n *nodetest.Fake) { n.Resend = true })
		for _, f := range fs[3:] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errCutOff })
		}
		require.NoError(t, m.Unlock(t.Context()), "nodes 0 and 1, and node 2's resent release")
	})
}

func TestUnlockResentRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Resend = true })
		}
		m := newFakeMutex(t, r, "k", WithTTL(time.Second))
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()), "every release was resent after it was applied")
		synctest.Wait()
		for _, f := range fs {
			_, held := f.Get("k")
			assert.False(t, held)
		}

		// Past the validity an absent key may have expired: not held.
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(time.Second)
		err := m.Unlock(t.Context())
		require.ErrorIs(t, err, ErrNotHeld)

		// Taken by another Value within the validity, on the same
		// servers: this release's first try freed the key there, and a
		// waiter took it after (or an operator forced the lock open,
		// which a release cannot tell apart): held.
		require.NoError(t, m.Lock(t.Context()))
		for _, f := range fs[:2] {
			f.Set("k", "someone else", time.Minute)
		}
		require.NoError(t, m.Unlock(t.Context()))

		// Taken by another Value past the validity: not held.
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(time.Second)
		for _, f := range fs[:2] {
			f.Set("k", "someone else", time.Minute)
		}
		require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld)
		for _, f := range fs[:2] {
			f.Set("k", "", -time.Second)
		}

		// Another server answered than the one known since before the
		// lock was taken: a restart or a failover lost the key, or one the
		// process did not learn of in time happened before the lock was
		// taken, and the release's earlier try deleted it (the simulator's
		// seed 7). Neither confirmed nor "not held".
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait() // the grants still on their way have landed
		for _, f := range fs[:2] {
			f.Faults(func(n *nodetest.Fake) { n.IDs = []string{n.Name + "-restarted"} })
			f.Set("k", "", -time.Second)
		}
		err = m.Unlock(t.Context())
		require.ErrorContains(t, err, "release not confirmed")
		require.NotErrorIs(t, err, ErrNotHeld)
		for _, f := range fs[:2] {
			f.Faults(func(n *nodetest.Fake) { n.IDs = nil })
		}

		// Found lost before: an absent key is no resend, even within the
		// validity.
		require.NoError(t, m.Lock(t.Context()))
		for _, f := range fs {
			f.Set("k", "someone else", time.Minute)
		}
		require.ErrorIs(t, m.Extend(t.Context()), ErrLockLost)
		for _, f := range fs {
			f.Set("k", "", -time.Second) // expired, as the fake sees it: absent
		}
		require.True(t, time.Now().Before(m.Until()))
		require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld)
	})
}

// A lease found lost has no fencing token any more.
func TestFenceAfterLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithFencing(), WithTTL(time.Second))
		require.NoError(t, m.Lock(t.Context()))
		require.NotZero(t, m.Fence())
		for _, f := range fs {
			f.Set("k", "taken", time.Minute)
		}
		require.ErrorIs(t, m.Extend(t.Context()), ErrLockLost)
		<-m.Done()
		assert.Zero(t, m.Fence(), "lost: no token to write with")
	})
}

// A node timeout says what last went wrong with the node when nothing came
// from it since: the client's own dial retries may outlast the timeout.
func TestTimeoutKeepsLastCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		p := r.e.Pool
		refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		sent := time.Now()
		assert.Equal(t, report.ErrNodeTimeout, p.TimeoutErr(0, sent), "nothing known")
		p.MarkDown(0, refused)
		err := p.TimeoutErr(0, sent)
		require.ErrorIs(t, err, report.ErrNodeTimeout)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.ErrorContains(t, err, "connection refused")

		time.Sleep(time.Millisecond)
		p.Answered(0)
		assert.Equal(t, report.ErrNodeTimeout, p.TimeoutErr(0, time.Now()), "the node answered since")

		bad := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
		p.MarkDown(0, bad)
		assert.ErrorIs(t, p.TimeoutErr(0, time.Now()), ErrMisconfigured, "a certificate error is the cause")
		r.Close(t.Context()) //nolint:errcheck // stops the probes
	})
}

// Two nodes that are clients of the same server make every acquisition
// fail: one server would count twice towards a quorum.
func TestSameServersRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		fs[0].IDs = []string{"run-a", "run-b"} // a cluster of two masters
		fs[2].IDs = []string{"run-c", "run-b"} // the same cluster, seeded elsewhere
		m := newFakeMutex(t, r, "k")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := m.Lock(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument)
		assert.ErrorContains(t, err, "nodes 0 (fake0) and 2 (fake2) are clients of the same Redis server (run_id run-b)")
		assert.NoError(t, ctx.Err(), "at once")
		synctest.Wait()
		for _, f := range fs {
			_, held := f.Get("k")
			assert.False(t, held, "%s: the attempt that found out was undone", f.Name)
		}
		assert.ErrorIs(t, m.TryLock(ctx), ErrInvalidArgument, "and later ones")
		assert.Equal(t, 1, fs[1].Count("acquire"), "nothing sent after the first attempt")
	})
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		fs[0].IDs = []string{"run-a", "run-b"}
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.Lock(t.Context()), "distinct servers")
	})
}

// Sentinel-managed clients all report one placeholder address: New takes
// them, and their identities tell them apart.
func TestNewTakesFailoverClients(t *testing.T) {
	clients := make([]redis.UniversalClient, 3)
	for i := range clients {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: fmt.Sprintf("m%d", i), SentinelAddrs: []string{"127.0.0.1:1"}})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	r, err := New(clients)
	require.NoError(t, err)
	require.NoError(t, r.Close(t.Context()))
	u := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "m", Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = u.Close() })
	r, err = New([]redis.UniversalClient{u, clients[0], clients[1]})
	require.NoError(t, err)
	require.NoError(t, r.Close(t.Context()))
}

// A fenced lock on a cluster node keeps its counter in the name's slot; a
// name whose slot no other key can share is refused at NewMutex.
func TestClusterNamesForFencing(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	t.Cleanup(func() { _ = cc.Close(); _ = plain.Close() })
	r, err := New([]redis.UniversalClient{cc, plain})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	for _, name := range []string{"job:7", "{acct:9}:job", "a{b}c"} {
		_, err := r.NewMutex(name, WithFencing())
		require.NoError(t, err, name)
	}
	for _, name := range []string{"a{}b", "only{open", "close}only"} {
		_, err := r.NewMutex(name, WithFencing())
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorContains(t, err, "hash tag", name)
		_, err = r.NewMutex(name, WithReentrant())
		require.NoError(t, err, "%s: a reentrant lock needs no second key", name)
	}
	r2, err := New([]redis.UniversalClient{plain})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r2.Close(context.Background()) })
	_, err = r2.NewMutex("a{}b", WithFencing())
	require.NoError(t, err, "plain nodes have no slots")
}
