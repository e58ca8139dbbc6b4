package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The demo's nodes: Redis servers in containers on the host's network,
// each on its own port of 127.0.0.1, run and killed with the docker
// command. The test harness (the integration package, over
// testcontainers-go) does the same with far more; the demo does not build
// it, so that `make demo` compiles only what it runs.

// defaultImage is the Redis image run when REDLOCK_REDIS_IMAGE is unset:
// scripts/build-redis-image.sh builds it, as the test harness runs it.
const defaultImage = "redlock-redis:7"

func image() string {
	if img := os.Getenv("REDLOCK_REDIS_IMAGE"); img != "" {
		return img
	}
	return defaultImage
}

// nodes is the demo's Redis servers, numbered from 0.
type nodes struct {
	ids   []string // container ids
	addrs []string
}

// startNodes runs n servers, keeping nothing on disk, and waits until each
// answers PING. On error, those already started are removed.
func startNodes(ctx context.Context, n int) (*nodes, error) {
	ns := &nodes{}
	for range n {
		port, err := freePort()
		if err != nil {
			return nil, errors.Join(err, ns.close())
		}
		id, err := docker(ctx, "run", "--detach", "--network", "host", image(),
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err != nil {
			return nil, errors.Join(err, ns.close())
		}
		ns.ids = append(ns.ids, id)
		ns.addrs = append(ns.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	for i, a := range ns.addrs {
		if err := waitReady(ctx, a); err != nil {
			return nil, errors.Join(fmt.Errorf("node %d: %w", i, err), ns.close())
		}
	}
	return ns, nil
}

// freePort is a port of 127.0.0.1 that nothing listens on now, below the
// kernel's ephemeral range, so that no outgoing connection takes it before
// the server binds it.
func freePort() (int, error) {
	for port := 12000 + int(time.Now().UnixNano()%3000); port < 16000; port++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = l.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port between 12000 and 16000 on 127.0.0.1")
}

// waitReady waits up to 30 s for the server at addr to answer PING.
func waitReady(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis at %s did not answer PING within 30s: %w", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (ns *nodes) Len() int { return len(ns.addrs) }

// Addr is node i's address.
func (ns *nodes) Addr(i int) string { return ns.addrs[i] }

// Clients returns one client per node with opts (nil: go-redis' defaults).
func (ns *nodes) Clients(opts *redis.Options) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(ns.addrs))
	for i, a := range ns.addrs {
		o := &redis.Options{}
		if opts != nil {
			*o = *opts
		}
		o.Addr = a
		out[i] = redis.NewClient(o)
	}
	return out
}

// Kill sends SIGKILL to node i: clients see connection refused at once.
func (ns *nodes) Kill(ctx context.Context, i int) error {
	_, err := docker(ctx, "kill", "--signal", "KILL", ns.ids[i])
	return err
}

// close removes every container started.
func (ns *nodes) close() error {
	if len(ns.ids) == 0 {
		return nil
	}
	_, err := docker(context.Background(), append([]string{"rm", "--force"}, ns.ids...)...)
	return err
}

// docker runs the docker command with args and returns its output,
// trimmed; its error says what docker printed.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", errors.New("no docker command: run the demo with `make demo`, which installs and starts Docker")
		}
		return "", fmt.Errorf("docker %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
