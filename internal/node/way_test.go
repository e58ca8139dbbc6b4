package node_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/conformance"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/internal/scripts"
)

// What has no way without scripts is refused at once, as misconfigured,
// naming scripting; the node changes nothing.
func TestTransactionsRefuseWhatNeedsScripts(t *testing.T) {
	for _, w := range []node.Way{node.Transactions, node.Native} {
		t.Run(w.String(), func(t *testing.T) {
			servers, clients := goredistest.Miniredis(t, 1)
			n := goredis.NewNode(clients[0])
			n.SetWay(w)
			t.Cleanup(func() { _ = n.Close(context.Background()) })
			conformance.Refuses(t, n, w)
			assert.Empty(t, servers[0].Keys(), "nothing was written")
		})
	}
	t.Run("fake", func(t *testing.T) {
		f := nodetest.New("fake")
		f.NoScripts = true
		conformance.Refuses(t, f, node.Transactions)
		assert.Empty(t, f.Data, "nothing was written")
		assert.Equal(t, node.Transactions, f.Way())
	})
}

// A node whose user is refused scripts switches by itself to the way
// without them, on the first refusal: the refused calls go again without
// scripts (none is lost or answered with the refusal), the switch is told
// once, and the server's DELEX is found by asking it.
func TestNodeSwitchesWhenScriptsRefused(t *testing.T) {
	var told []string
	n := refusingNodeWith(t, goredistest.RefuseScripts, node.Config{
		OnWay: func(w node.Way, why error) { told = append(told, w.String()+": "+why.Error()) },
	})
	require.Equal(t, node.Scripts, n.Way())

	a := &node.Acquire{Key: "k", Token: "a", TTL: time.Minute, FenceKey: node.FenceKey("k")}
	rep := callOne(n, a)
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK, "the refused acquisition went again without scripts")
	assert.Equal(t, node.Native, n.Way(), "miniredis answers DELEX")
	require.Len(t, told, 1)
	assert.Contains(t, told[0], "native: NOPERM")
	require.ErrorContains(t, n.Refusal(), "'evalsha'")

	rep = callOne(n, &node.Fence{Key: "k", Token: "a", FenceKey: node.FenceKey("k"), Fence: 7})
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	rep = callOne(n, &node.Acquire{Key: "k", Token: "b", TTL: time.Minute, FenceKey: node.FenceKey("k")})
	assert.Equal(t, node.Grant{Holder: "a", Counter: 7}, node.GrantOf(rep))
	rep = callOne(n, &node.Release{Key: "k", Token: "a", Channel: node.ReleaseChannel("k")})
	assert.True(t, rep.OK)
	rep = callOne(n, sem("s", "a", 2))
	require.ErrorIs(t, rep.Err, node.ErrNoScripts)
	assert.Contains(t, rep.Err.Error(), "'evalsha'", "the refusal is named")
	assert.Len(t, told, 1, "told once")
}

// interferer runs change before the first times MULTI ... EXEC pipelines
// leave the client: a key the transaction watches changes between its
// reads and its EXEC.
type interferer struct {
	mu     sync.Mutex
	times  int
	change func()
}

// set arms the interferer: change runs before the next times EXECs.
func (h *interferer) set(times int, change func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.times, h.change = times, change
}

// left is how many interferences are still armed.
func (h *interferer) left() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.times
}

func (*interferer) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*interferer) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *interferer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		if h.times > 0 && len(cmds) > 0 && cmds[0].Name() == "multi" {
			h.times--
			h.change()
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// interfered returns a miniredis server, spoken to by transactions
// through a node whose client carries an interferer.
func interfered(t *testing.T) (*miniredis.Miniredis, *interferer, *node.Redis) {
	t.Helper()
	servers, clients := goredistest.Miniredis(t, 1)
	c := clients[0].(*redis.Client)
	h := &interferer{}
	c.AddHook(h)
	n := goredis.NewNode(c)
	n.SetWay(node.Transactions)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return servers[0], h, n
}

// A transaction whose watched key changed is tried again on what the key
// holds then, never applied to the changed key: a re-entry whose lock was
// deleted between its reads and its EXEC is refused, not re-created; and
// one that keeps losing the race until the node timeout is answered
// ErrAborted, which says nothing was applied.
func TestTransactionRetriesOnChange(t *testing.T) {
	server, h, n := interfered(t)
	again := &node.Acquire{Shape: node.Reentrant, Key: "k", Token: "a", TTL: time.Minute, Reenter: true}

	require.True(t, callOne(n, &node.Acquire{Shape: node.Reentrant, Key: "k", Token: "a", TTL: time.Minute}).OK)
	h.set(1, func() { server.Del("k") })
	rep := callOne(n, again)
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "the lock was deleted before EXEC: the re-entry is refused")
	assert.False(t, server.Exists("k"), "and the key is not re-created")
	assert.Zero(t, h.left())

	require.True(t, callOne(n, &node.Acquire{Shape: node.Reentrant, Key: "k", Token: "a", TTL: time.Minute}).OK)
	h.set(1<<20, func() { server.HSet("k", "a", "1") })
	ch := make(chan node.Reply, 1)
	n.Do(context.Background(), time.Now().Add(50*time.Millisecond), again, func(r node.Reply) { ch <- r })
	rep = <-ch
	require.ErrorIs(t, rep.Err, node.ErrAborted)
	assert.True(t, node.Unsent(rep.Err), "an aborted operation was not applied")
	assert.Equal(t, "1", server.HGet("k", "a"), "no hold was added")
}

// A release whose lock expired and was taken by the next holder between
// its reads and its EXEC deletes nothing: the watched key changed, and the
// release read again finds another token. Likewise an extension.
func TestStaleReleaseInterleaved(t *testing.T) {
	server, h, n := interfered(t)
	require.True(t, callOne(n, lock("k", "a")).OK)
	h.set(1, func() { require.NoError(t, server.Set("k", "b")) }) // a's expired; b's grant
	rep := callOne(n, unlock("k", "a"))
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "a's release found b's token")
	assert.Zero(t, h.left(), "the interleaving happened")
	v, err := server.Get("k")
	require.NoError(t, err)
	assert.Equal(t, "b", v, "b's key stands")

	h.set(1, func() { require.NoError(t, server.Set("k", "c")) })
	rep = callOne(n, extend("k", "b", ttl))
	assert.False(t, rep.OK, "b's extension found c's token")
	assert.Equal(t, time.Duration(0), server.TTL("k"), "c's key was not given b's time to live")
}

// A vote's reply carries the node's time, one TIME per batch; so does a
// Clock, which has no command of its own; without scripts too.
func TestRepliesCarryTheNodesClock(t *testing.T) {
	for _, w := range []node.Way{node.Scripts, node.Transactions} {
		t.Run(w.String(), func(t *testing.T) {
			servers, clients := goredistest.Miniredis(t, 1)
			at := time.Now().Add(time.Hour).Truncate(time.Second)
			servers[0].SetTime(at)
			n := goredis.NewNode(clients[0])
			n.SetWay(w)
			t.Cleanup(func() { _ = n.Close(context.Background()) })
			for _, op := range []node.Op{node.Clock{}, clocked(lock("k", "a")), extend("k", "a", ttl)} {
				rep := callOne(n, op)
				require.NoError(t, rep.Err, op.Name())
				assert.True(t, rep.OK, op.Name())
				assert.WithinDuration(t, at, rep.Time, time.Second, "%s: the node's clock, not this process's", op.Name())
			}
			assert.True(t, callOne(n, unlock("k", "a")).Time.IsZero(), "a release is no vote")
		})
	}
}

// clocked asks a plain grant for the node's time.
func clocked(a *node.Acquire) *node.Acquire {
	a.Clock = true
	return a
}

// timeCounter counts the TIME commands a client sends.
type timeCounter struct{ n atomic.Int32 }

func (*timeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *timeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *timeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *timeCounter) count(cmd redis.Cmder) {
	if cmd.Name() == "time" {
		c.n.Add(1)
	}
}

// A plain lock's grant carries the node's time in its own reply (its
// script reads TIME): once the node has answered one TIME, no TIME travels
// beside it. A fenced grant's script does not, and the batch ends with one.
func TestPlainGrantCarriesItsOwnClock(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	servers[0].SetTime(at)
	times := &timeCounter{}
	clients[0].AddHook(times)
	n := goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	require.True(t, callOne(n, lock("first", "a")).OK)
	assert.Equal(t, int32(1), times.n.Load(), "the node's first timed batch asks TIME: may the user run it?")
	times.n.Store(0)
	rep := callOne(n, clocked(lock("k", "a")))
	require.True(t, rep.OK)
	assert.WithinDuration(t, at, rep.Time, time.Second, "the node's clock, from the grant's own reply")
	assert.Zero(t, times.n.Load(), "no TIME beside a plain grant")
	rep = callOne(n, lock("k2", "a"))
	require.True(t, rep.OK)
	assert.True(t, rep.Time.IsZero(), "a plain grant not asked for the clock carries none")
	assert.Zero(t, times.n.Load(), "and has no TIME beside it")
	rep = callOne(n, fenced("f", "a"))
	require.True(t, rep.OK)
	assert.WithinDuration(t, at, rep.Time, time.Second)
	assert.Equal(t, int32(1), times.n.Load(), "a fenced grant's batch ends with TIME")
	// Read, write (without fencing) and permit grants answer with the
	// node's time too, with no TIME beside them.
	for _, op := range []node.Op{
		&node.Acquire{Shape: node.Read, Key: "r", Token: "a", TTL: ttl},
		&node.Acquire{Shape: node.Write, Key: "w", Token: "a", TTL: ttl, Intent: node.IntentKey("w"), Writer: "wr"},
		&node.Acquire{Shape: node.Semaphore, Key: "s", Token: "a", TTL: ttl, Permits: 2},
	} {
		times.n.Store(0)
		rep = callOne(n, op)
		require.True(t, rep.OK, op.Name())
		assert.WithinDuration(t, at, rep.Time, time.Second, op.Name())
		assert.Zero(t, times.n.Load(), "no TIME beside a %s grant", op.Name())
	}
}

// A Valkey without its Lua engine (MODULE UNLOAD lua) answers EVALSHA
// NOSCRIPT and the EVAL that follows "ERR Could not find scripting
// engine": the node speaks without scripts as for a user refused them (the
// Mutex works), and what needs scripts is refused with ErrNoScripts.
func TestNodeWithoutLuaEngine(t *testing.T) {
	n := refusingNode(t, goredistest.NoLua)
	rep := callOne(n, lock("k", "a"))
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK, "the refused grant went again without scripts")
	assert.Equal(t, node.Native, n.Way(), "miniredis answers DELEX")
	require.ErrorContains(t, n.Refusal(), "scripting engine")
	assert.True(t, callOne(n, extend("k", "a", ttl)).OK)
	assert.True(t, callOne(n, unlock("k", "a")).OK)
	rep = callOne(n, sem("s", "a", 2))
	require.ErrorIs(t, rep.Err, node.ErrNoScripts)
	assert.Contains(t, rep.Err.Error(), "scripting engine", "the refusal is named")
}

// refusingNode is a node over a miniredis server whose client refuse
// makes refuse scripts.
func refusingNode(t *testing.T, refuse func(*redis.Client)) *node.Redis {
	t.Helper()
	return refusingNodeWith(t, refuse, node.Config{})
}

// refusingNodeWith is refusingNode made as cfg says.
func refusingNodeWith(t *testing.T, refuse func(*redis.Client), cfg node.Config) *node.Redis {
	t.Helper()
	_, clients := goredistest.Miniredis(t, 1)
	c := clients[0].(*redis.Client)
	refuse(c)
	n := goredis.NewNodeWith(c, cfg)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// A grant that finds the key holding its token already (a release handed
// the lock over to it, or the client resent the SET) re-arms the key for
// its own TTL, as acquire_plain.lua does, also in the server's own SET NX
// GET PX, which leaves the TTL as it was: the grant's validity counts from
// this attempt and must not outlast the key.
func TestNativeGrantOfItsOwnTokenReArms(t *testing.T) {
	for _, w := range []node.Way{node.Scripts, node.Transactions} {
		t.Run(w.String(), func(t *testing.T) {
			servers, clients := goredistest.Miniredis(t, 1)
			s, n := servers[0], goredis.NewNode(clients[0])
			n.SetWay(w)
			t.Cleanup(func() { _ = n.Close(context.Background()) })
			require.NoError(t, s.Set("k", "t1"))
			s.SetTTL("k", 100*time.Millisecond)
			rep := callOne(n, &node.Acquire{Key: "k", Token: "t1", TTL: 5 * time.Second})
			require.NoError(t, rep.Err)
			assert.True(t, rep.OK)
			assert.Equal(t, 5*time.Second, s.TTL("k"))

			require.NoError(t, s.Set("k", "other"))
			rep = callOne(n, &node.Acquire{Key: "k", Token: "t1", TTL: 5 * time.Second})
			require.NoError(t, rep.Err)
			assert.False(t, rep.OK)
		})
	}
}

// pipelines records the commands of each pipeline a client sends.
type pipelines struct {
	mu   sync.Mutex
	sent [][]string
}

func (*pipelines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !own[cmd.Name()] {
			p.mu.Lock()
			p.sent = append(p.sent, []string{cmd.Name()})
			p.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// own are the commands a client sends of its own: a new connection's, and
// SCRIPT LOAD in the background.
var own = map[string]bool{"hello": true, "client": true, "script": true}

// all returns every command sent, in order.
func (p *pipelines) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, names := range p.sent {
		out = append(out, names...)
	}
	return out
}

func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, cmd := range cmds {
			names[i] = cmd.Name()
		}
		if own[names[0]] {
			return next(ctx, cmds)
		}
		p.mu.Lock()
		p.sent = append(p.sent, names)
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (p *pipelines) last() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[len(p.sent)-1]
}

// Beside scripts, on a server with SET ... NX GET (Redis 7.0), a plain
// grant is that command, and the release keeps its script. go-redis reads
// a grant's nil as an error, which costs it the most as a round trip's
// first reply: the batch's TIME leads once the node has answered one,
// else a PING. The node's first call is a script: scripts are found
// refused before anything is sent beside them.
func TestNativeGrantBesideScripts(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	servers[0].SetTime(at)
	sent := &pipelines{}
	clients[0].AddHook(sent)
	n := goredis.NewNode(clients[0])
	n.SetCaps(node.Caps{Known: true, Server: "redis", Version: "7.0.15"})
	t.Cleanup(func() { _ = n.Close(context.Background()) })

	require.True(t, callOne(n, lock("first", "a")).OK)
	assert.Contains(t, sent.sent[0], "evalsha", "until a script ran, the node speaks scripts (then EVAL after NOSCRIPT)")
	require.True(t, callOne(n, lock("second", "a")).OK)
	assert.Equal(t, []string{"ping", "set"}, sent.last(), "no TIME to lead: a PING does")
	rep := callOne(n, clocked(lock("k", "a")))
	require.True(t, rep.OK)
	assert.Equal(t, []string{"time", "set"}, sent.last(), "the TIME leads")
	assert.WithinDuration(t, at, rep.Time, time.Second, "the grant carries the node's clock")
	rep = callOne(n, lock("k", "b"))
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "held by a")
	assert.Equal(t, "a", rep.Value.(node.Grant).Holder)
	rep = callOne(n, unlock("k", "a"))
	require.True(t, rep.OK)
	assert.False(t, servers[0].Exists("k"))

	// A grant that finds the key holding its token (a release handed the
	// lock over to it) re-arms it by script, whose hash the node may have
	// lost: never by WATCH, which the documented ACL line does not allow.
	for _, flush := range []bool{false, true} {
		require.NoError(t, servers[0].Set("handed", "c"))
		servers[0].SetTTL("handed", time.Millisecond)
		if flush {
			last := scripts.All[len(scripts.All)-1].Hash // the node's load of them all is over
			require.Eventually(t, func() bool {
				ok, err := clients[0].ScriptExists(context.Background(), last).Result()
				return err == nil && ok[0]
			}, 5*time.Second, time.Millisecond)
			require.NoError(t, clients[0].ScriptFlush(context.Background()).Err())
		}
		before := len(sent.all())
		rep = callOne(n, lock("handed", "c"))
		require.NoError(t, rep.Err)
		require.True(t, rep.OK, "flush %v", flush)
		assert.Equal(t, ttl, servers[0].TTL("handed"), "re-armed for the grant's TTL")
		assert.WithinDuration(t, at, rep.Time, time.Second, "the vote carries the node's time, read after the TTL was armed")
		after := sent.all()[before:]
		assert.NotContains(t, after, "watch")
		if flush {
			assert.Equal(t, []string{"ping", "set", "evalsha", "eval"}, after)
		} else {
			assert.Equal(t, []string{"ping", "set", "evalsha"}, after)
		}
	}
}

// afterDelete runs change once, right after the first pipeline that
// carries a release's announcement returns: between a native release's
// round trip and any that follows it.
type afterDelete struct {
	once   sync.Once
	change func()
}

func (*afterDelete) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*afterDelete) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *afterDelete) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "publish" }) {
			h.once.Do(h.change)
		}
		return err
	}
}

// A native release that deletes nothing tells another's key from an
// absent one by what the node held at its delete: a key another client
// held then and released right after reads as taken, not gone (the
// scripts read it in the same step; an EXISTS in a later round trip would
// find it gone).
func TestNativeReleaseReadsAbsenceWithItsDelete(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	c := clients[0].(*redis.Client)
	h := &afterDelete{change: func() { servers[0].Del("k") }}
	c.AddHook(h)
	n := goredis.NewNode(c)
	n.SetWay(node.Native)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	require.True(t, callOne(n, lock("k", "b")).OK)
	rep := callOne(n, unlock("k", "a"))
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK)
	assert.False(t, servers[0].Exists("k"), "b released after a's delete")
	r := node.ReleasedOf(rep)
	assert.True(t, r.Taken, "b held the key at a's delete: %+v", r)
	assert.False(t, r.Gone, "%+v", r)
}
