package goredis

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client given to several nodes (several Redlocks) gets one dial hook:
// every node reads the same dials.
func TestDialHookOncePerClient(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	a, b := New(c, time.Now), New(c, time.Now)
	assert.Same(t, a.dials, b.dials)
	assert.Nil(t, a.master, "not Sentinel-managed")

	f := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = f.Close() })
	a, b = New(f, time.Now), New(f, time.Now)
	assert.Same(t, a.dials, b.dials)
	assert.NotNil(t, a.master)
	assert.Same(t, a.master, b.master)

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cc.Close() })
	a, b = New(cc, time.Now), New(cc, time.Now)
	assert.NotNil(t, a.dials, "a cluster's shards' dials are watched")
	assert.Same(t, a.dials, b.dials)
	assert.Nil(t, a.master)

	r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = r.Close() })
	a, b = New(r, time.Now), New(r, time.Now)
	assert.NotNil(t, a.dials, "a ring's shards' dials are watched")
	assert.Same(t, a.dials, b.dials)
}

// A shard whose dials fail is named while another shard's succeed: a
// failure is kept per address until a dial to that address, started
// later, connects and answers.
func TestDialFailurePerAddress(t *testing.T) {
	d := &dials{last: map[string]dialOutcome{}, now: time.Now}
	refused := errors.New("connection refused")
	d.dialed(1, "a:1", nil, refused)
	answer(t, d, "b:1", 2, nil)
	require.NotNil(t, d.failure(), "b's success does not clear a's failure")
	assert.Equal(t, refused, d.failure().Err)

	d.dialed(3, "a:1", okConn{}, nil)
	assert.Equal(t, refused, d.failure().Err, "a's dial connected, and has not answered yet")
	answer(t, d, "a:1", 3, errors.New("read: connection reset by peer"))
	assert.ErrorContains(t, d.failure().Err, "reset", "a's connection failed before its first reply")

	answer(t, d, "a:1", 5, nil)
	d.dialed(4, "a:1", nil, errors.New("stale")) // began before the success
	assert.Nil(t, d.failure(), "a dial to a:1 started later answered")
	d.dialed(6, "b:1", nil, context.Canceled)
	assert.Nil(t, d.failure(), "a dial given up on says nothing of the node")
	answer(t, d, "b:1", 7, io.EOF)
	assert.ErrorContains(t, d.failure().Err, "closed the connection before its first reply")
	answer(t, d, "b:1", 8, os.ErrDeadlineExceeded)
	assert.NotNil(t, d.failure(), "a connection that timed out recorded nothing")
}

// answer has dial number n to addr connect, and its connection's first
// read return err (nil: a reply).
func answer(t *testing.T, d *dials, addr string, n uint64, err error) {
	t.Helper()
	d.dialed(n, addr, okConn{}, nil)
	buf := make([]byte, 1)
	_, _ = watchConn(okConn{err: err}, d, addr, n).Read(buf)
}

// okConn is a connection that dialled: it has no remote address, and its
// reads return one byte, or err.
type okConn struct {
	net.Conn
	err error
}

func (okConn) RemoteAddr() net.Addr { return nil }

func (c okConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	return 1, nil
}
