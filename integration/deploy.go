package integration

// The deployment shapes users run the lock on, beside the plain nodes of
// cluster.go: masters managed by Redis Sentinel, a Redis Cluster (as one
// node of a Redlock), and a node that serves TLS only. Every server runs in
// its own container of Image(), with host networking, on its own port of
// 127.0.0.1.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// readyLog is the line a Redis server (not a Sentinel) logs once it
// listens; Redis 7.2 and later append the listener's kind.
const readyLog = "Ready to accept connections"

// settleTimeout bounds each wait for a deployment to reach the state asked
// for: a replica synced, sentinels agreeing, a cluster's slots covered.
const settleTimeout = 30 * time.Second

// checkEnv refuses to run without the environment scripts/with-redis-env.sh
// sets (see Start).
func checkEnv() error {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") != "true" || os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		return errors.New("integration: run through scripts/with-redis-env.sh (make test, make demo, make bench), " +
			"which sets TESTCONTAINERS_RYUK_DISABLED=true and TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1")
	}
	return nil
}

// containers is a set of started containers, terminated together. Safe for
// concurrent use: servers are started from several goroutines.
type containers struct {
	mu   sync.Mutex
	list []*testcontainers.DockerContainer
}

// run starts one container of Image() with host networking and the given
// customizers, waiting for waitLog in its log. A container that was created
// is kept for terminate even when starting it failed.
func (cs *containers) run(ctx context.Context, what, waitLog string, opts ...testcontainers.ContainerCustomizer) error {
	opts = append([]testcontainers.ContainerCustomizer{
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.NetworkMode = "host" }),
		testcontainers.WithWaitStrategy(wait.ForLog(waitLog).WithStartupTimeout(30 * time.Second)),
	}, opts...)
	ctr, err := testcontainers.Run(ctx, Image(), opts...)
	if ctr != nil {
		cs.mu.Lock()
		cs.list = append(cs.list, ctr)
		cs.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("integration: start %s (image %s): %w", what, Image(), err)
	}
	return nil
}

// parallel runs every start function at once and joins their errors.
func parallel(starts ...func() error) error {
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	for i, start := range starts {
		wg.Go(func() { errs[i] = start() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// terminate stops and removes every container, in parallel.
func (cs *containers) terminate(ctx context.Context) error {
	cs.mu.Lock()
	list := slices.Clone(cs.list)
	cs.mu.Unlock()
	starts := make([]func() error, len(list))
	for i, c := range list {
		starts[i] = func() error { return c.Terminate(ctx, testcontainers.StopTimeout(0)) }
	}
	if err := parallel(starts...); err != nil {
		return fmt.Errorf("integration: terminate: %w", err)
	}
	return nil
}

// serverArgs are the command-line options of a server without persistence
// on port, bound to 127.0.0.1; they add to the image's configuration.
func serverArgs(port int, extra ...string) []string {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	return append(args, extra...)
}

// addr is host:port on 127.0.0.1.
func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// poll calls check every 50ms until it returns nil, ctx ends or
// settleTimeout passes; it then returns check's last error, saying what was
// awaited.
func poll(ctx context.Context, what string, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("integration: %s: gave up after %v: %w", what, settleTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// adminClient is a client for the harness's own commands: no retries, short
// timeouts, so that a poll sees each failure at once.
func adminClient(address string, tlsConfig *tls.Config) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: address, TLSConfig: tlsConfig, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
	})
}

// pingEach checks that every address answers PING.
func pingEach(ctx context.Context, addrs []string, tlsConfig *tls.Config) error {
	for _, a := range addrs {
		if err := poll(ctx, "PING "+a, func(ctx context.Context) error {
			c := adminClient(a, tlsConfig)
			defer func() { _ = c.Close() }()
			return c.Ping(ctx).Err()
		}); err != nil {
			return err
		}
	}
	return nil
}

// Sentinels is a Sentinel deployment: independent masters, each with one
// replica, and three Sentinel processes monitoring every master (quorum 2,
// down after 1s). Master i is monitored under the name MasterName(i).
// Methods are safe for concurrent use.
type Sentinels struct {
	ctrs      containers
	masters   []int // the port of master i's first master
	replicas  []int // the port of master i's first replica
	sentinels []int
}

// Sentinel timing: a master that does not answer for sentinelDownAfter is
// subjectively down; a failover that has not completed within
// sentinelFailoverTimeout is aborted (and the next one waits twice that).
const (
	sentinelDownAfter       = 1000 // milliseconds
	sentinelFailoverTimeout = 5000 // milliseconds
	sentinelCount           = 3
)

// StartSentinel starts masters independent Redis masters, each with one
// replica (replicaof its master), and three Sentinels monitoring them all,
// every server in its own container (started in parallel) on its own port
// of 127.0.0.1, none with persistence. It returns once every replica is in
// sync and every Sentinel knows every master, its replica and the two other
// Sentinels, so that [Sentinels.Failover] can start at once. On error, the
// containers already started are terminated.
func StartSentinel(ctx context.Context, masters int) (*Sentinels, error) {
	if err := checkEnv(); err != nil {
		return nil, err
	}
	if masters < 1 {
		return nil, fmt.Errorf("integration: sentinel needs at least one master, got %d", masters)
	}
	if _, err := testcontainers.NewDockerProvider(); err != nil {
		return nil, dockerMissing(err)
	}
	ports, err := freePorts(2*masters + sentinelCount)
	if err != nil {
		return nil, err
	}
	s := &Sentinels{masters: ports[:masters], replicas: ports[masters : 2*masters], sentinels: ports[2*masters:]}
	// Servers first, Sentinels once every replica is in sync: a Sentinel
	// learns a master's replicas from its INFO, which it reads when it
	// connects and then every 10 s; started together, the first INFO
	// often lists no replica yet, and failover is impossible for 10 s.
	// A full sync starts at once rather than after the default 5 s
	// wait for more replicas (repl-diskless-sync-delay), on the first
	// sync and on the one after a failover, when the old master turns
	// replica.
	fastSync := []string{"--repl-diskless-sync-delay", "0"}
	var starts []func() error
	for i := range masters {
		starts = append(starts,
			func() error {
				return s.ctrs.run(ctx, fmt.Sprintf("master %s", s.MasterName(i)), readyLog,
					testcontainers.WithCmd(serverArgs(s.masters[i], fastSync...)...))
			},
			func() error {
				// Its master may not listen yet: the replica retries the
				// connection every second until it does.
				args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(s.masters[i])}, fastSync...)
				return s.ctrs.run(ctx, fmt.Sprintf("replica of %s", s.MasterName(i)), readyLog,
					testcontainers.WithCmd(serverArgs(s.replicas[i], args...)...))
			})
	}
	err = parallel(starts...)
	for i := range masters {
		if err != nil {
			break
		}
		err = poll(ctx, "replica of "+s.MasterName(i)+" in sync", func(ctx context.Context) error {
			return replicaOf(ctx, addr(s.replicas[i]), addr(s.masters[i]))
		})
	}
	if err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	starts = starts[:0]
	for _, port := range s.sentinels {
		starts = append(starts, func() error {
			// Sentinel rewrites its configuration file, so it must be a
			// writable file of its own: copied into /tmp, and named on
			// the command line in place of the image's configuration
			// (which ENTRYPOINT names: hence the entrypoint override;
			// the bare name works whichever directory of the default
			// PATH holds the binary).
			return s.ctrs.run(ctx, fmt.Sprintf("sentinel on port %d", port), "Sentinel ID is",
				testcontainers.WithEntrypoint("redis-server"),
				testcontainers.WithCmd("/tmp/sentinel.conf", "--sentinel"),
				testcontainers.WithFiles(testcontainers.ContainerFile{
					Reader:            strings.NewReader(s.sentinelConf(port)),
					ContainerFilePath: "/tmp/sentinel.conf",
					FileMode:          0o644,
				}))
		})
	}
	if err := parallel(starts...); err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// sentinelConf is the configuration of the Sentinel on port.
func (s *Sentinels) sentinelConf(port int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "port %d\nbind 127.0.0.1\ndir /tmp\n", port)
	for i, mp := range s.masters {
		name := s.MasterName(i)
		fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d 2\n", name, mp)
		fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", name, sentinelDownAfter)
		fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", name, sentinelFailoverTimeout)
		fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", name)
	}
	return b.String()
}

// settle waits until every Sentinel sees every master, an available
// replica of it and the other Sentinels.
func (s *Sentinels) settle(ctx context.Context) error {
	if err := pingEach(ctx, s.SentinelAddrs(), nil); err != nil {
		return err
	}
	for _, sa := range s.SentinelAddrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sa, MaxRetries: -1})
		for i := range s.masters {
			name := s.MasterName(i)
			err := poll(ctx, "sentinel "+sa+" knows "+name, func(ctx context.Context) error {
				reps, err := sc.Replicas(ctx, name).Result()
				if err != nil {
					return err
				}
				if len(reps) != 1 || reps[0]["master-link-status"] != "ok" || strings.Contains(reps[0]["flags"], "down") ||
					strings.Contains(reps[0]["flags"], "disconnected") {
					return fmt.Errorf("replicas of %s: %v", name, reps)
				}
				others, err := sc.Sentinels(ctx, name).Result()
				if err != nil {
					return err
				}
				if len(others) != sentinelCount-1 {
					return fmt.Errorf("sentinels of %s: %d, want %d", name, len(others), sentinelCount-1)
				}
				return nil
			})
			if err != nil {
				_ = sc.Close()
				return err
			}
		}
		_ = sc.Close()
	}
	return nil
}

// replicaOf checks that the server at replica is a replica of master, with
// its link up (ROLE: slave, master's host and port, "connected").
func replicaOf(ctx context.Context, replica, master string) error {
	c := adminClient(replica, nil)
	defer func() { _ = c.Close() }()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return err
	}
	if len(role) < 4 || role[0] != "slave" {
		return fmt.Errorf("%s: ROLE %v, not a replica", replica, role)
	}
	port, _ := role[2].(int64)
	host, _ := role[1].(string)
	if got := net.JoinHostPort(host, strconv.FormatInt(port, 10)); got != master || role[3] != "connected" {
		return fmt.Errorf("%s: ROLE %v, want a replica of %s, connected", replica, role, master)
	}
	return nil
}

// isMaster checks that the server at address says it is a master.
func isMaster(ctx context.Context, address string) error {
	c := adminClient(address, nil)
	defer func() { _ = c.Close() }()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return err
	}
	if len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("%s: ROLE %v, not a master", address, role)
	}
	return nil
}

// MasterName returns the name the Sentinels monitor master i under: "m0",
// "m1", ...
func (s *Sentinels) MasterName(i int) string { return "m" + strconv.Itoa(i) }

// Len returns the number of masters.
func (s *Sentinels) Len() int { return len(s.masters) }

// SentinelAddrs returns the Sentinels' addresses, host:port on 127.0.0.1.
func (s *Sentinels) SentinelAddrs() []string {
	out := make([]string, len(s.sentinels))
	for i, p := range s.sentinels {
		out[i] = addr(p)
	}
	return out
}

// MasterAddr asks the Sentinels (SENTINEL GET-MASTER-ADDR-BY-NAME) for
// master i's current address, host:port; the first that answers decides.
func (s *Sentinels) MasterAddr(ctx context.Context, i int) (string, error) {
	var errs []error
	for _, sa := range s.SentinelAddrs() {
		a, err := sentinelMaster(ctx, sa, s.MasterName(i))
		if err == nil {
			return a, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("integration: master address of %s: %w", s.MasterName(i), errors.Join(errs...))
}

// sentinelMaster asks the Sentinel at sa for name's master.
func sentinelMaster(ctx context.Context, sa, name string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: sa, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer func() { _ = sc.Close() }()
	hp, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", sa, err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: master of %s: %v", sa, name, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// ServerAddrs returns the addresses of the two servers of master i, its
// first master first, whichever is master now.
func (s *Sentinels) ServerAddrs(i int) []string {
	return []string{addr(s.masters[i]), addr(s.replicas[i])}
}

// Failover forces a failover of master i (SENTINEL FAILOVER, sent to the
// first Sentinel) while its master is up, and waits until every Sentinel
// names the other server as master, that server answers ROLE as a master,
// and the old master has become its replica with its link up. The switch
// takes about 1 s; the Sentinels turn the old master into a replica only
// some 10 s later (Redis waits 4 × its 2 s hello period after the old
// master's role was last reported, and reads a replica's INFO every 10 s),
// during which it stays a writable master that failover clients no longer
// use. It gives up after 30s. Writes acknowledged by the old master but not
// yet replicated are lost, as in any Redis failover.
func (s *Sentinels) Failover(ctx context.Context, i int) error {
	name := s.MasterName(i)
	old, err := s.MasterAddr(ctx, i)
	if err != nil {
		return err
	}
	var next string
	for _, a := range s.ServerAddrs(i) {
		if a != old {
			next = a
		}
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs()[0], MaxRetries: -1})
	err = sc.Failover(ctx, name).Err()
	_ = sc.Close()
	if err != nil {
		return fmt.Errorf("integration: SENTINEL FAILOVER %s: %w", name, err)
	}
	return poll(ctx, "failover of "+name+" from "+old+" to "+next, func(ctx context.Context) error {
		for _, sa := range s.SentinelAddrs() {
			got, err := sentinelMaster(ctx, sa, name)
			if err != nil {
				return err
			}
			if got != next {
				return fmt.Errorf("sentinel %s names %s", sa, got)
			}
		}
		if err := isMaster(ctx, next); err != nil {
			return err
		}
		return replicaOf(ctx, old, next)
	})
}

// Clients returns one new failover client (redis.NewFailoverClient) per
// master, each finding its master through the Sentinels, as an independent
// process would have. opts may be nil; it is copied, and its MasterName and
// SentinelAddrs are replaced. The caller closes them.
func (s *Sentinels) Clients(opts *redis.FailoverOptions) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(s.masters))
	for i := range out {
		o := &redis.FailoverOptions{}
		if opts != nil {
			*o = *opts
		}
		o.MasterName = s.MasterName(i)
		o.SentinelAddrs = s.SentinelAddrs()
		out[i] = redis.NewFailoverClient(o)
	}
	return out
}

// Close terminates every container: masters, replicas and Sentinels.
func (s *Sentinels) Close(ctx context.Context) error { return s.ctrs.terminate(ctx) }

// RedisCluster is a Redis Cluster of masters only (no replicas), each in
// its own container on its own port of 127.0.0.1, with the 16384 slots
// split evenly between them. Methods are safe for concurrent use.
type RedisCluster struct {
	ctrs  containers
	ports []int
}

// clusterBusOffset is how far above a node's port its cluster bus listens.
const clusterBusOffset = 10000

// StartRedisCluster starts a Redis Cluster of masters master nodes
// (cluster-enabled, no persistence, no replicas), in parallel, gives node i
// the i-th of masters even ranges of slots (CLUSTER ADDSLOTSRANGE), joins
// them (CLUSTER MEET) and waits until every node reports cluster_state:ok
// with all 16384 slots covered and every node known. Each node's port p
// and its bus port p+10000 are both free on 127.0.0.1 and below the
// kernel's ephemeral range. On error, the containers already started are
// terminated.
func StartRedisCluster(ctx context.Context, masters int) (*RedisCluster, error) {
	if err := checkEnv(); err != nil {
		return nil, err
	}
	if masters < 1 {
		return nil, fmt.Errorf("integration: a cluster needs at least one master, got %d", masters)
	}
	if _, err := testcontainers.NewDockerProvider(); err != nil {
		return nil, dockerMissing(err)
	}
	ports, err := freePortPairs(masters, clusterBusOffset)
	if err != nil {
		return nil, err
	}
	rc := &RedisCluster{ports: ports}
	starts := make([]func() error, masters)
	for i, port := range ports {
		starts[i] = func() error {
			return rc.ctrs.run(ctx, fmt.Sprintf("cluster node %d on port %d", i, port), readyLog,
				testcontainers.WithCmd(serverArgs(port,
					"--cluster-enabled", "yes",
					"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
					"--cluster-node-timeout", "5000")...))
		}
	}
	if err := parallel(starts...); err != nil {
		_ = rc.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := rc.join(ctx); err != nil {
		_ = rc.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return rc, nil
}

// join assigns the slots, introduces the nodes to node 0 and waits until
// the cluster is whole.
func (rc *RedisCluster) join(ctx context.Context) error {
	const slots = 16384
	n := len(rc.ports)
	for i, a := range rc.Addrs() {
		c := adminClient(a, nil)
		err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*slots/n, (i+1)*slots/n-1).Err()
		if err == nil && i > 0 {
			err = c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(rc.ports[0])).Err()
		}
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("integration: cluster node %d (%s): %w", i, a, err)
		}
	}
	for i, a := range rc.Addrs() {
		if err := poll(ctx, fmt.Sprintf("cluster node %d (%s) ok", i, a), func(ctx context.Context) error {
			c := adminClient(a, nil)
			defer func() { _ = c.Close() }()
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{
				"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384",
				"cluster_known_nodes:" + strconv.Itoa(n), "cluster_size:" + strconv.Itoa(n),
			} {
				if !strings.Contains(info, want+"\r\n") {
					return fmt.Errorf("CLUSTER INFO lacks %s:\n%s", want, info)
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// freePortPairs finds n ports p, each with p+offset also free, on
// 127.0.0.1, below the kernel's ephemeral range (32768 and up by default)
// so that no outgoing connection takes one meanwhile.
func freePortPairs(n, offset int) ([]int, error) {
	const lo, hi = 15000, 22000 // p+offset stays below 32768
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	listen := func(p int) bool {
		l, err := net.Listen("tcp", addr(p))
		if err != nil {
			return false
		}
		ls = append(ls, l)
		return true
	}
	out := make([]int, 0, n)
	for try := 0; len(out) < n; try++ {
		if try == 1000 {
			return nil, fmt.Errorf("integration: no %d free port pairs (p, p+%d) in [%d, %d)", n, offset, lo, hi)
		}
		p := lo + mrand.IntN(hi-lo)
		if slices.Contains(out, p) || slices.Contains(out, p+offset) || slices.Contains(out, p-offset) {
			continue
		}
		if listen(p) && listen(p+offset) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Addrs returns every node's address, host:port on 127.0.0.1.
func (rc *RedisCluster) Addrs() []string {
	out := make([]string, len(rc.ports))
	for i, p := range rc.ports {
		out[i] = addr(p)
	}
	return out
}

// Client returns a new cluster client seeded with every node's address.
// opts may be nil; it is copied, and its Addrs are replaced. The caller
// closes it.
func (rc *RedisCluster) Client(opts *redis.ClusterOptions) *redis.ClusterClient {
	return rc.ClientSeeded(opts, rc.Addrs()...)
}

// ClientSeeded returns a new cluster client seeded with the given
// addresses only (it discovers the other nodes from them), as a process
// configured with a subset of the nodes would have. opts may be nil; it is
// copied, and its Addrs are replaced. The caller closes it.
func (rc *RedisCluster) ClientSeeded(opts *redis.ClusterOptions, addrs ...string) *redis.ClusterClient {
	o := &redis.ClusterOptions{}
	if opts != nil {
		*o = *opts
	}
	o.Addrs = slices.Clone(addrs)
	return redis.NewClusterClient(o)
}

// Close terminates every node's container.
func (rc *RedisCluster) Close(ctx context.Context) error { return rc.ctrs.terminate(ctx) }

// TLSNode is one Redis node that serves TLS only (no plain port), with a
// certificate for 127.0.0.1 signed by a CA made for it alone. Clients are
// not asked for certificates. Methods are safe for concurrent use.
type TLSNode struct {
	ctrs containers
	port int
	ca   *x509.Certificate
}

// StartTLS generates a CA and a server certificate for 127.0.0.1 (ECDSA
// P-256, valid for a day), copies them into a new container and runs Redis
// there with TLS on its own port of 127.0.0.1 and no plain port
// (--port 0 --tls-port p --tls-auth-clients no). It returns once the node
// answers PING over TLS. On error, the container is terminated.
func StartTLS(ctx context.Context) (*TLSNode, error) {
	if err := checkEnv(); err != nil {
		return nil, err
	}
	if _, err := testcontainers.NewDockerProvider(); err != nil {
		return nil, dockerMissing(err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	ca, caPEM, certPEM, keyPEM, err := newCertificates()
	if err != nil {
		return nil, err
	}
	tn := &TLSNode{port: ports[0], ca: ca}
	file := func(name string, data []byte) testcontainers.ContainerFile {
		// 0644: the image may run Redis as another user than the files'
		// owner (redis:7-alpine does); the key is a throwaway.
		return testcontainers.ContainerFile{Reader: bytes.NewReader(data), ContainerFilePath: "/tmp/tls/" + name, FileMode: 0o644}
	}
	args := []string{
		"--port", "0", "--tls-port", strconv.Itoa(tn.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--tls-cert-file", "/tmp/tls/server.crt", "--tls-key-file", "/tmp/tls/server.key",
		"--tls-ca-cert-file", "/tmp/tls/ca.crt", "--tls-auth-clients", "no",
	}
	err = tn.ctrs.run(ctx, fmt.Sprintf("TLS node on port %d", tn.port), readyLog,
		testcontainers.WithCmd(args...),
		testcontainers.WithFiles(file("ca.crt", caPEM), file("server.crt", certPEM), file("server.key", keyPEM)))
	if err == nil {
		err = pingEach(ctx, []string{tn.Addr()}, tn.ClientTLS())
	}
	if err != nil {
		_ = tn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return tn, nil
}

// newCertificates makes a CA and a server certificate for 127.0.0.1 that
// it signs, returning the CA and the PEM of the CA, the certificate and its
// key (PKCS #8).
func newCertificates() (ca *x509.Certificate, caPEM, certPEM, keyPEM []byte, err error) {
	wrap := func(err error) error { return fmt.Errorf("integration: TLS certificates: %w", err) }
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redlock integration test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, wrap(err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return ca, caPEM, certPEM, keyPEM, nil
}

// Addr returns the node's TLS address, host:port on 127.0.0.1.
func (tn *TLSNode) Addr() string { return addr(tn.port) }

// ClientTLS returns a new client TLS configuration that trusts the node's
// CA (and nothing else) and verifies the certificate for 127.0.0.1.
func (tn *TLSNode) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(tn.ca)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// CAPEM returns the node's CA certificate, PEM-encoded, for programs
// told where to find their roots (SSL_CERT_FILE).
func (tn *TLSNode) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tn.ca.Raw})
}

// UntrustedTLS returns a new client TLS configuration that trusts no CA at
// all: every handshake with the node fails verifying its certificate
// ("x509: certificate signed by unknown authority"), as with a client
// given the wrong CA.
func (tn *TLSNode) UntrustedTLS() *tls.Config {
	return &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// Close terminates the node's container.
func (tn *TLSNode) Close(ctx context.Context) error { return tn.ctrs.terminate(ctx) }
