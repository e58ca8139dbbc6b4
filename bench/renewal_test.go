package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// BenchmarkRenewal holds many Mutexes with renewal (TTL 3 s, renewed
// every second) and measures what holding costs, per lock held for one
// second: an op is one lock-second, so -benchtime 20000x holds 5,000 locks
// for 4 s. Acquiring and releasing them is left out: the figures cover the
// hold alone, from a second after the last acquisition.
//
//	REDLOCK_BENCH_ADDRS=127.0.0.1:7101,... go test -run '^$' -bench Renewal -benchtime 20000x . -args -defaults
//
// It reports the client's CPU (its rusage) and the servers' (INFO cpu)
// per lock-second; node 0's command time and calls per lock-second (INFO
// commandstats: about one extension each, and a TIME when the node's
// clock is read); the goroutines per lock held; the locks lost (a hold
// that ended before its Unlock) and the Unlocks that failed: there must be
// none on a quiet loopback.
func BenchmarkRenewal(b *testing.B) {
	addrs := benchAddrs(b)
	for _, locks := range []int{500, 5000} {
		b.Run(fmt.Sprintf("locks=%d", locks), func(b *testing.B) {
			clients := benchClients(addrs)
			defer closeAll(clients)
			holdLocks(b, clients, locks)
		})
	}
}

// holdLocks is one run of BenchmarkRenewal: locks Mutexes held for
// b.N/locks seconds (at least one).
func holdLocks(b *testing.B, clients []redis.UniversalClient, locks int) {
	b.Helper()
	ctx := context.Background()
	extFailed := &renewalFailures{b: b}
	rl, err := redlock.New(clients, redlock.WithTTL(3*time.Second), redlock.WithRenewal(), redlock.WithObserver(extFailed))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rl.Close(ctx) }()
	run := renewalRuns.Add(1) // names of their own: an earlier run's keys may live on
	ms := make([]*redlock.Mutex, locks)
	var g errgroup.Group
	g.SetLimit(64)
	for i := range ms {
		g.Go(func() error {
			m, err := rl.NewMutex(fmt.Sprintf("renewal:%s:%d:%d:%d", renewalProcess, run, locks, i))
			if err != nil {
				return err
			}
			ms[i] = m
			return m.Lock(ctx)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // renewals under way, spread as the acquisitions were
	hold := time.Duration(max(1, (b.N+locks-1)/locks)) * time.Second
	for _, c := range clients {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	servers0 := serversCPU(b, clients)
	client0 := selfCPU()
	goroutines := runtime.NumGoroutine()
	stopProfile := profileHold(b)
	b.ResetTimer()
	time.Sleep(hold)
	b.StopTimer()
	stopProfile()
	client := selfCPU() - client0
	servers := serversCPU(b, clients) - servers0
	usec, calls := extensions(b, clients[0])
	lost := 0
	for _, m := range ms {
		if m.Err() != nil {
			lost++
		}
	}
	lockSeconds := float64(locks) * hold.Seconds()
	b.ReportMetric(float64(client.Microseconds())/lockSeconds, "client-µs/lock-s")
	b.ReportMetric(float64(servers.Microseconds())/lockSeconds, "servers-µs/lock-s")
	b.ReportMetric(float64(calls)/lockSeconds, "node0-calls/lock-s")
	b.ReportMetric(usec/lockSeconds, "node0-µs/lock-s")
	b.ReportMetric(float64(goroutines)/float64(locks), "goroutines/lock")
	b.ReportMetric(float64(lost), "lost")
	var unlockFailed atomic.Int64
	for _, m := range ms {
		g.Go(func() error {
			if err := m.Unlock(ctx); err != nil {
				if unlockFailed.Add(1) == 1 {
					b.Log("first Unlock that failed:", err)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	b.ReportMetric(float64(unlockFailed.Load()), "unlock-failed")
	b.ReportMetric(float64(extFailed.n.Load()), "renewals-failed")
}

// holdProfile, when set, is where BenchmarkRenewal writes a CPU profile
// of the hold alone (the last run's), without the acquisitions and
// releases around it that -cpuprofile counts too.
var holdProfile = flag.String("holdprofile", "", "BenchmarkRenewal: write a CPU profile of the hold alone to this file")

// profileHold starts the hold's CPU profile, if asked for; the function
// it returns stops it.
func profileHold(b *testing.B) func() {
	b.Helper()
	if *holdProfile == "" {
		return func() {}
	}
	f, err := os.Create(*holdProfile)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// renewalFailures is an Observer that counts the extensions of renewal
// that failed, and logs the first.
type renewalFailures struct {
	b *testing.B
	n atomic.Int64
}

func (f *renewalFailures) OpStart(ctx context.Context, _ report.Op) context.Context { return ctx }
func (f *renewalFailures) OpEnd(_ context.Context, op report.Op, res report.OpResult) {
	if op.Renewal && res.Err != nil && f.n.Add(1) == 1 {
		f.b.Log("first extension of renewal that failed:", res.Err)
	}
}
func (*renewalFailures) LeaseEnd(report.Lease)                         {}
func (*renewalFailures) NodeFailed(context.Context, *report.NodeError) {}

// renewalRuns counts BenchmarkRenewal's runs, and renewalProcess tells
// this process's names from those of the processes run before it.
var (
	renewalRuns    atomic.Int64
	renewalProcess = strconv.FormatInt(time.Now().UnixNano(), 36)
)

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serversCPU is the servers' CPU time so far (INFO cpu), main thread and
// children.
func serversCPU(b *testing.B, clients []redis.UniversalClient) time.Duration {
	b.Helper()
	var total float64
	for _, c := range clients {
		info, err := c.Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
			total += infoFloat(info, f)
		}
	}
	return time.Duration(total * float64(time.Second))
}

// extensions sums node c's command time (µs) and calls since its
// statistics were reset, of the commands a client sends: a script
// (EVALSHA, EVAL), SET (IFEQ, the native extension) and TIME; the
// commands a script runs are counted apart by the server, and their time
// is in the script's already.
func extensions(b *testing.B, c redis.UniversalClient) (usec float64, calls int64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_set", "cmdstat_time":
		default:
			ok = false
		}
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				n, _ := strconv.ParseInt(v, 10, 64)
				calls += n
			case "usec":
				f, _ := strconv.ParseFloat(v, 64)
				usec += f
			}
		}
	}
	return usec, calls
}

// infoFloat is the value of field in an INFO reply, 0 when absent.
func infoFloat(info, field string) float64 {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
