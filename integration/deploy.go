package integration

// The deployment shapes users run the lock on, beside the plain nodes of
// cluster.go: masters managed by Redis Sentinel, a Redis Cluster (as one
// node of a Redlock), and a node that serves TLS only. Every server runs in
// its own container of Image(), with host networking, on its own port of
// 127.0.0.1.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
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
