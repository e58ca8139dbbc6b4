package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
)

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
