// Command cpupair measures what a benchmark of bench/ costs in CPU, per
// operation (per lock+unlock pair for BenchmarkPair), for several builds of
// the repository side by side: the client's CPU, the servers' CPU, and the
// command time of the first node per command (INFO commandstats). CPU
// accounting does not drift the way wall time does on a shared machine,
// so two builds compare on it even when timings move by a fifth.
//
// It starts its own redis-server processes on free loopback ports, builds
// bench/'s test binary of each revision (git archive into a temporary
// directory; "." is the working tree as it is), then runs the binaries one
// after another, round after round (every other round in reverse), on the
// same servers, and prints the medians side by side:
//
//	cd bench && go run ./cmd/cpupair -revs 7eb7bc3,main,. -bench redlock-go/64,redsync/64
//
// Each run resets the servers' statistics (CONFIG RESETSTAT) and reads,
// around the benchmark process: the servers' CPU from /proc/PID/stat, the
// benchmark process's own CPU from its rusage, and node 0's INFO
// commandstats. Each is measured twice, for one operation and for -ops,
// and the difference divided (-setup): a process's set-up costs as much
// in a short run as in a long one, and a build's benchmark may set up
// more than another's (bench/ constructs every implementation it has,
// the rueidis and valkey-go clients among them, whichever one runs).
// Only loopback is used; every server started is stopped by its PID at
// the end.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	revs     = flag.String("revs", "7eb7bc3,.", "comma-separated git revisions to compare; \".\" is the working tree")
	bench    = flag.String("bench", "redlock-go/64", "the benchmark to run, one, so that CPU divides by its operations: a -test.bench pattern, or IMPL/GOROUTINES for BenchmarkPair's (\"redsync/1\"); several, separated by commas, each a column of every build's")
	ops      = flag.Int("ops", 20000, "operations per run (-test.benchtime Nx)")
	rounds   = flag.Int("rounds", 3, "runs of each build, alternating; the table shows medians")
	nodes    = flag.Int("nodes", 5, "redis-server processes to start")
	server   = flag.String("server", "redis-server", "the redis-server binary")
	defaults = flag.Bool("defaults", true, "pass -defaults to the benchmark (go-redis' default client options)")
	keep     = flag.Bool("keep", false, "keep the temporary directory of the builds")
	setup    = flag.Bool("setup", true, "subtract a run of one operation from each run, so that the set-up's CPU and calls count in no figure; false for a benchmark whose own metrics are the figures (BenchmarkRenewal)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cpupair:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "cpupair-")
	if err != nil {
		return err
	}
	if !*keep {
		defer func() { _ = os.RemoveAll(tmp) }()
	}
	var builds []build
	for _, rev := range strings.Split(*revs, ",") {
		b, err := buildRev(tmp, rev)
		if err != nil {
			return fmt.Errorf("build %s: %w", rev, err)
		}
		for _, pattern := range strings.Split(*bench, ",") {
			b.bench = pattern
			builds = append(builds, b)
		}
	}
	srv, err := startServers(ctx, *nodes)
	defer srv.stop()
	if err != nil {
		return err
	}
	for r := 1; r <= *rounds; r++ {
		for k := range builds {
			// Every other round in reverse, so that a load that drifts
			// during a round weighs on no column more than on another.
			i := k
			if r%2 == 0 {
				i = len(builds) - 1 - k
			}
			m, err := measure(ctx, srv, builds[i].binary, builds[i].bench)
			if err != nil {
				// A benchmark that fails (a loaded machine's node
				// timeouts end BenchmarkPair) is counted, not measured.
				builds[i].failed++
				fmt.Fprintf(os.Stderr, "round %d %s %s failed: %s\n", r, builds[i].rev, builds[i].bench, firstLines(err.Error(), 12))
				continue
			}
			builds[i].runs = append(builds[i].runs, m)
			fmt.Fprintf(os.Stderr, "round %d %s: client %.1f µs, servers %.1f µs, node 0 %.1f µs per op; %s\n",
				r, builds[i].rev, m.client, m.servers, m.nodeTotal(), strings.Join(m.lines, "; "))
		}
	}
	fmt.Print(table(builds))
	return nil
}

// build is one revision's benchmark binary, a benchmark of it, and its
// runs: a column of the table.
type build struct {
	rev, binary, bench string
	runs               []measurement
	failed             int // runs that failed, not in runs
}

// buildRev builds bench/'s test binary of rev into dir.
func buildRev(dir, rev string) (build, error) {
	top, err := output("", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return build{}, err
	}
	src := top
	name := "worktree"
	if rev != "." {
		commit, err := output(top, "git", "rev-parse", "--short", rev+"^{commit}")
		if err != nil {
			return build{}, err
		}
		name = commit
		src = filepath.Join(dir, commit)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return build{}, err
		}
		archive := exec.Command("sh", "-c", "git archive --format=tar \"$0\" | tar -x -C \"$1\"", commit, src)
		archive.Dir = top
		if out, err := archive.CombinedOutput(); err != nil {
			return build{}, fmt.Errorf("git archive: %w: %s", err, out)
		}
	}
	bin := filepath.Join(dir, name+".test")
	fmt.Fprintf(os.Stderr, "building %s (%s)\n", rev, name)
	if _, err := output(filepath.Join(src, "bench"), "go", "test", "-c", "-o", bin, "."); err != nil {
		return build{}, err
	}
	return build{rev: rev, binary: bin}, nil
}

func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// servers are the redis-server processes this command started.
type servers struct {
	procs   []*exec.Cmd
	clients []*redis.Client
	addrs   []string
}

// startServers starts n redis-server processes, each on a free loopback
// port, without persistence, and waits until each answers PING.
func startServers(ctx context.Context, n int) (*servers, error) {
	s := &servers{}
	for range n {
		port, err := freePort()
		if err != nil {
			return s, err
		}
		cmd := exec.Command(*server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			return s, err
		}
		s.procs = append(s.procs, cmd)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		s.addrs = append(s.addrs, addr)
		s.clients = append(s.clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	for i, c := range s.clients {
		var err error
		for range 100 { // at most 5 s
			if err = c.Ping(ctx).Err(); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			return s, fmt.Errorf("node %d (%s) does not answer: %w", i+1, s.addrs[i], err)
		}
	}
	return s, nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop kills every server started, by its PID, and waits for it.
func (s *servers) stop() {
	for _, c := range s.clients {
		_ = c.Close()
	}
	for _, p := range s.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
}

// cpu is the CPU the servers used so far, in seconds.
func (s *servers) cpu() (float64, error) {
	total := 0.0
	for _, p := range s.procs {
		t, err := procCPU(p.Process.Pid)
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU reads process pid's user and system time from /proc/PID/stat,
// in seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: the fields count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / clockTicks, nil
}

// measurement is one run, per operation of the benchmark.
type measurement struct {
	client, servers float64            // µs of CPU
	wall            float64            // ns/op as the benchmark reports it, in µs
	allocs          float64            // allocs/op
	metrics         map[string]float64 // the benchmark's own metrics, by unit
	calls, usec     map[string]float64 // node 0's commandstats, per command
	lines           []string
}

func (m measurement) nodeTotal() float64 {
	t := 0.0
	for _, u := range m.usec {
		t += u
	}
	return t
}

// totalCalls is node 0's calls per operation, every command's.
func (m measurement) totalCalls() float64 {
	t := 0.0
	for _, c := range m.calls {
		t += c
	}
	return t
}

// perCall is node 0's command time per call of command c.
func (m measurement) perCall(c string) float64 {
	if m.calls[c] == 0 {
		return 0
	}
	return m.usec[c] / m.calls[c]
}

var benchLine = regexp.MustCompile(`^Benchmark\S*\s+(\d+)\s+(.*)$`)

// sample is what one run of a benchmark binary cost in all, set-up
// included: the process's CPU, the servers' CPU, node 0's commandstats
// (calls and µs by command), in seconds and counts, and its output.
type sample struct {
	client, servers float64
	calls, usec     map[string]float64
	out             []byte
}

// measure measures bench of binary against the servers, per operation:
// a run of *ops operations, less (with -setup) a run of one just before
// it, so that what a run costs whatever its length (the process's start,
// dialing, the benchmark's set-up of implementations it does not run,
// loading scripts) counts in no build's figures.
func measure(ctx context.Context, s *servers, binary, bench string) (measurement, error) {
	var base sample
	if *setup {
		var err error
		if base, err = runOnce(ctx, s, binary, bench, 1); err != nil {
			return measurement{}, err
		}
	}
	full, err := runOnce(ctx, s, binary, bench, *ops)
	if err != nil {
		return measurement{}, err
	}
	m := measurement{metrics: map[string]float64{}, calls: map[string]float64{}, usec: map[string]float64{}}
	n := m.read(full.out)
	if n == 0 {
		return m, fmt.Errorf("no benchmark matched %q: %s", bench, full.out)
	}
	if *setup {
		n = max(1, n-1) // the longer run's operations beyond the shorter's
	}
	m.perOp(full, base, n)
	return m, nil
}

// perOp sets m's CPU and node 0's commandstats to what full cost beyond
// base (a zero sample: nothing), per operation of the n it ran beyond it.
func (m *measurement) perOp(full, base sample, n float64) {
	m.client = (full.client - base.client) / n * 1e6
	m.servers = (full.servers - base.servers) / n * 1e6
	for c, x := range full.calls {
		m.calls[c] = (x - base.calls[c]) / n
		m.usec[c] = (full.usec[c] - base.usec[c]) / n
	}
}

// runOnce runs bench of binary once, for ops operations, and reads what
// it cost.
func runOnce(ctx context.Context, s *servers, binary, bench string, ops int) (sample, error) {
	for _, c := range s.clients {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return sample{}, err
		}
	}
	s0, err := s.cpu()
	if err != nil {
		return sample{}, err
	}
	args := []string{"-test.run", "^$", "-test.bench", pattern(bench), "-test.benchtime", fmt.Sprintf("%dx", ops), "-test.count", "1"}
	if *defaults {
		args = append(args, "-defaults")
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "REDLOCK_BENCH_ADDRS="+strings.Join(s.addrs, ","))
	cmd.Dir = filepath.Dir(binary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return sample{}, fmt.Errorf("%w: %s", err, out)
	}
	s1, err := s.cpu()
	if err != nil {
		return sample{}, err
	}
	usage := cmd.ProcessState
	r := sample{
		client:  (usage.UserTime() + usage.SystemTime()).Seconds(),
		servers: s1 - s0,
		out:     out,
	}
	info, err := s.clients[0].Info(ctx, "commandstats").Result()
	if err != nil {
		return r, err
	}
	r.calls, r.usec = commandstats(info)
	return r, nil
}

// read takes the benchmark lines of out into m, and returns how many
// operations they ran.
func (m *measurement) read(out []byte) float64 {
	n := 0.0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		sub := benchLine.FindStringSubmatch(sc.Text())
		if sub == nil {
			continue
		}
		m.lines = append(m.lines, sc.Text())
		iters, _ := strconv.ParseFloat(sub[1], 64)
		n += iters
		f := strings.Fields(sub[2])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m.metric(f[i+1], v)
			}
		}
	}
	return n
}

// metric takes one value of a benchmark line, by its unit.
func (m *measurement) metric(unit string, v float64) {
	switch unit {
	case "ns/op":
		m.wall = v / 1000
	case "allocs/op":
		m.allocs = v
	case "B/op":
	default:
		m.metrics[unit] = v
	}
}

// commandstats reads node 0's calls and command time by command, in
// all, from its INFO commandstats.
func commandstats(info string) (calls, usec map[string]float64) {
	calls, usec = map[string]float64{}, map[string]float64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls[name] = x
			case "usec":
				usec[name] = x
			}
		}
	}
	return calls, usec
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
