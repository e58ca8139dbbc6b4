// Package integration runs the lock against real Redis servers: a harness
// that starts N Redis nodes in containers (testcontainers-go, host
// networking on 127.0.0.1) and injects faults into them, and the scenarios
// in its tests. The demo (integration/cmd/redlock-demo) runs the same image
// with the docker command instead, so that it does not build this harness.
// The server matrix runs each Redis and Valkey build scripts/fetch-servers.sh
// fetches as processes instead (servers.go).
//
// The image is $REDLOCK_REDIS_IMAGE, redlock-redis:7 when unset, which
// scripts/build-redis-image.sh builds from Debian's redis-server package.
// Nodes whose wall clock a test moves (WithClocks) run
// $REDLOCK_FAKETIME_IMAGE, built by scripts/build-faketime-image.sh.
// `make test` and `make demo` prepare the engine and images and set the
// environment testcontainers needs (scripts/with-redis-env.sh).
package integration

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// DefaultImage is the Redis image used when REDLOCK_REDIS_IMAGE is unset.
const DefaultImage = "redlock-redis:7"

// Image returns the Redis image the harness runs.
func Image() string {
	if img := os.Getenv("REDLOCK_REDIS_IMAGE"); img != "" {
		return img
	}
	return DefaultImage
}

// Cluster is a set of independent Redis nodes, each in its own container
// listening on its own port of 127.0.0.1. A node keeps its port across
// stop/start and kill/start. Methods are safe for concurrent use.
type Cluster struct {
	docker client.APIClient
	nodes  []*node
}

type node struct {
	mu       sync.Mutex
	port     int
	persist  bool
	image    string
	clockDir string   // host directory mounted at /clock; "" on the real clock
	args     []string // server options added after the harness's own
	ctr      *testcontainers.DockerContainer
}

// An Option changes how Start runs the nodes.
type Option func(*startConfig)

type startConfig struct {
	persist, clocks bool
	ports           []int
	args            [][]string // per node; a shorter list leaves the rest alone
}

// WithPorts runs the nodes on these ports of 127.0.0.1, one per node, in
// order, instead of ports the kernel picks: for a program that names its
// servers, as the README's quick start does. Start fails when one of them
// is taken.
func WithPorts(ports ...int) Option { return func(c *startConfig) { c.ports = ports } }

// WithArgs adds server options to each node, args[i] to node i, after the
// harness's own (a later option wins: "--appendonly", "yes" turns
// persistence on); nodes past the end of args get none.
func WithArgs(args ...[]string) Option { return func(c *startConfig) { c.args = args } }

// WithPersistence runs every node with appendonly yes and appendfsync
// always: each write is on disk before it is acknowledged, so a node that
// is killed or stopped and restarted keeps its keys (their TTLs go on
// running while it is down: Redis stores absolute expiry times).
func WithPersistence() Option { return func(c *startConfig) { c.persist = true } }

// Start starts n Redis nodes in parallel and waits until each answers PING.
// Without WithPersistence a node keeps nothing on disk: a restarted node has
// forgotten every key. With WithClocks each node's wall clock can be moved
// (SetClock). On error, the nodes already started are terminated.
func Start(ctx context.Context, n int, opts ...Option) (*Cluster, error) {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") != "true" || os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		// Without these testcontainers pulls its reaper image from a
		// registry and dials the default gateway: traffic off this machine.
		return nil, errors.New("integration: run through scripts/with-redis-env.sh (make test, make demo, make bench), " +
			"which sets TESTCONTAINERS_RYUK_DISABLED=true and TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1")
	}
	var cfg startConfig
	for _, o := range opts {
		o(&cfg)
	}
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, dockerMissing(err)
	}
	c := &Cluster{docker: provider.Client(), nodes: make([]*node, n)}
	if err := c.plan(cfg); err != nil {
		_ = c.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = c.nodes[i].run(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	for i := range n {
		if err := c.waitReady(ctx, i); err != nil {
			_ = c.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return c, nil
}

// plan fills c's nodes, none started yet, as cfg asks: their image,
// ports, arguments and clock directories.
func (c *Cluster) plan(cfg startConfig) error {
	n := len(c.nodes)
	image := Image()
	if cfg.clocks {
		var err error
		if image, err = FaketimeImage(); err != nil {
			return err
		}
	}
	ports, err := freePorts(n)
	if cfg.ports != nil {
		ports, err = fixedPorts(n, cfg.ports)
	}
	if err != nil {
		return err
	}
	for i := range n {
		c.nodes[i] = &node{port: ports[i], persist: cfg.persist, image: image}
		if i < len(cfg.args) {
			c.nodes[i].args = cfg.args[i]
		}
		if cfg.clocks {
			if c.nodes[i].clockDir, err = newClockDir(); err != nil {
				return err
			}
		}
	}
	return nil
}

func dockerMissing(err error) error {
	return fmt.Errorf("integration: no Docker engine (%w); run the tests with `make test`, "+
		"which installs and starts one as root, or start Docker yourself", err)
}

func (n *node) run(ctx context.Context) error {
	args := []string{"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--save", "", "--enable-debug-command", "yes"}
	if n.persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always", "--dir", "/data")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, n.args...)
	ctr, err := testcontainers.Run(ctx, n.image,
		testcontainers.WithCmd(args...),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
			if n.clockDir != "" {
				hc.Binds = append(hc.Binds, n.clockDir+":"+clockMount+":ro")
			}
		}),
		testcontainers.WithWaitStrategy(wait.ForLog("Ready to accept connections").WithStartupTimeout(30*time.Second)),
	)
	n.ctr = ctr
	if err != nil {
		return fmt.Errorf("integration: start redis on port %d (image %s): %w", n.port, n.image, err)
	}
	return nil
}

// freePorts finds n distinct free ports on 127.0.0.1 for servers to bind
// later. They are drawn below the kernel's ephemeral range (32768 and up
// by default), apart from freePortPairs' range, so that no outgoing
// connection takes one before its server binds it (a Sentinel's port,
// taken between the check and the bind, once failed a CI run); and a port
// is handed out once per process (see claim), so that tests running in
// parallel never get the same one.
func freePorts(n int) ([]int, error) {
	const lo, hi = 10000, 15000
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, 0, n)
	for try := 0; len(out) < n; try++ {
		if try == 1000 {
			return nil, fmt.Errorf("integration: no %d free ports in [%d, %d)", n, lo, hi)
		}
		p := lo + mrand.IntN(hi-lo)
		l, err := net.Listen("tcp", addr(p))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		if claim(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// claimed are the ports this process handed out for servers.
var claimed struct {
	sync.Mutex
	ports map[int]bool
}

// claim marks the ports ps handed out, and reports whether none was
// before (then it marks none).
func claim(ps ...int) bool {
	claimed.Lock()
	defer claimed.Unlock()
	for _, p := range ps {
		if claimed.ports[p] {
			return false
		}
	}
	if claimed.ports == nil {
		claimed.ports = map[int]bool{}
	}
	for _, p := range ps {
		claimed.ports[p] = true
	}
	return true
}

// fixedPorts checks that n ports were given and that each is free on
// 127.0.0.1, so that a server already listening there is not taken for a
// node of this cluster.
func fixedPorts(n int, ports []int) ([]int, error) {
	if len(ports) != n {
		return nil, fmt.Errorf("integration: %d ports for %d nodes", len(ports), n)
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return nil, fmt.Errorf("integration: port %d is taken (stop what listens there): %w", p, err)
		}
		_ = l.Close()
	}
	return ports, nil
}

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Addr returns node i's address, host:port on 127.0.0.1.
func (c *Cluster) Addr(i int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.nodes[i].port))
}

// Clients returns one new go-redis client per node, as an independent
// process would have. opts may be nil; its Addr is replaced. The caller
// closes them.
func (c *Cluster) Clients(opts *redis.Options) []redis.UniversalClient {
	return newClients(len(c.nodes), c.Addr, opts)
}

// newClients returns n clients with opts (nil for the defaults), the i-th
// connecting to addr(i).
func newClients(n int, addr func(int) string, opts *redis.Options) []redis.UniversalClient {
	out := make([]redis.UniversalClient, n)
	for i := range out {
		o := &redis.Options{}
		if opts != nil {
			*o = *opts
		}
		o.Addr = addr(i)
		out[i] = redis.NewClient(o)
	}
	return out
}

// Kill sends SIGKILL to node i: clients see connection refused at once.
func (c *Cluster) Kill(ctx context.Context, i int) error {
	_, err := c.docker.ContainerKill(ctx, c.id(i), client.ContainerKillOptions{Signal: "SIGKILL"})
	return c.wrap("kill", i, err)
}

// Stop stops node i gracefully.
func (c *Cluster) Stop(ctx context.Context, i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	timeout := 5 * time.Second
	return c.wrap("stop", i, n.ctr.Stop(ctx, &timeout))
}

// Restart starts node i again, after Kill or Stop, on the same port, and
// waits until it answers PING. Without persistence it has lost every key.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	err := n.ctr.Start(ctx)
	n.mu.Unlock()
	if err != nil {
		return c.wrap("start", i, err)
	}
	return c.waitReady(ctx, i)
}

// Pause freezes node i (cgroup freezer): connections stay open and
// commands get no answer, as with a stalled machine.
func (c *Cluster) Pause(ctx context.Context, i int) error {
	_, err := c.docker.ContainerPause(ctx, c.id(i), client.ContainerPauseOptions{})
	return c.wrap("pause", i, err)
}

// Unpause resumes node i; it then answers the commands queued meanwhile.
func (c *Cluster) Unpause(ctx context.Context, i int) error {
	_, err := c.docker.ContainerUnpause(ctx, c.id(i), client.ContainerUnpauseOptions{})
	return c.wrap("unpause", i, err)
}

// Close terminates every node's container and removes its clock directory.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		if n.ctr != nil {
			errs = append(errs, c.wrap("terminate", i, n.ctr.Terminate(ctx, testcontainers.StopTimeout(0))))
		}
		if n.clockDir != "" {
			errs = append(errs, c.wrap("remove clock directory of", i, os.RemoveAll(n.clockDir)))
		}
	}
	return errors.Join(errs...)
}

// waitReady polls PING on node i until it answers (the log's "Ready" line
// cannot tell a restart from the first start).
func (c *Cluster) waitReady(ctx context.Context, i int) error {
	rc := redis.NewClient(&redis.Options{Addr: c.Addr(i), MaxRetries: -1, DialTimeout: time.Second})
	defer func() { _ = rc.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := rc.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return c.wrap("wait for PING", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) id(i int) string {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ctr.GetContainerID()
}

func (c *Cluster) wrap(op string, i int, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("integration: %s node %d (%s): %w", op, i, c.Addr(i), err)
}
